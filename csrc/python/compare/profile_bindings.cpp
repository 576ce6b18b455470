// _compare.profile_files: compare_files in its stages, each timed, for
// benchmarks/compare_memory.py's breakdown of where a compare's time goes.
#include <pybind11/stl.h>

#include <time.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "compare/comparison.h"
#include "compare/first_divergence.h"
#include "compare/matching.h"
#include "compare/verdicts.h"
#include "python/compare/bindings.h"

namespace graphprobe::compare::python {

void bind_profile(py::module_& m) {
  m.def(
      "profile_files",
      [](const std::string& target, const std::string& bench, const CompareOptions& options) {
        // CPU time of this thread: on a shared machine, wall time measures the neighbours.
        auto cpu = [] {
          timespec ts{};
          clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
          return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
        };
        std::vector<std::pair<std::string, double>> stages;
        double t0 = cpu();
        auto lap = [&](const char* name) {
          const double now = cpu();
          stages.emplace_back(name, now - t0);
          t0 = now;
        };
        auto result = std::make_shared<CompareResult>();
        {
          py::gil_scoped_release release;
          result->target = read_dump(target);
          lap("read target");
          result->bench = read_dump(bench);
          lap("read bench");
          result->rows = match_rows(result->target, result->bench, options.fuzzy, &result->target.notes);
          lap("match");
          apply_verdicts(result->target, result->bench, result->rows, options.thresholds, options.graphprobe_verdicts);
          lap("verdicts");
          measure_coverage(*result);
          find_first_divergence(*result, options.thresholds);
          lap("first divergence");
        }
        return std::make_pair(result, stages);
      },
      py::arg("target_path"), py::arg("bench_path"), py::arg("options") = CompareOptions{},
      "compare_files in stages, each timed in CPU seconds of the calling thread: (result without its counts tallied, [(stage, seconds)]) with the "
      "stages read target, read bench, match, verdicts, first divergence. For benchmarks only.");
}

}  // namespace graphprobe::compare::python
