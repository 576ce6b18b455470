#include "compare/mapped_file_guard.h"

#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <mutex>

namespace graphprobe::compare {
namespace {

// Global because a signal handler reaches nothing else: the guarded ranges
// are read there without locks or allocation. A range is published by
// storing its end before its begin and withdrawn begin first, so that the
// handler never sees a begin with a stale end.
struct Slot {
  std::atomic<bool> taken{false};
  std::atomic<uintptr_t> begin{0}, end{0};
  std::atomic<bool> shrank{false};
};
constexpr int kSlots = 64;  // ranges mapped at once: two per compare in flight
Slot g_slots[kSlots];
struct sigaction g_previous;  // SIGBUS's disposition before ours (set once, before the handler runs)
uintptr_t g_page = 4096;
std::once_flag g_installed;

void pass_on(int sig, siginfo_t* info, void* context) {
  if (g_previous.sa_flags & SA_SIGINFO) {
    if (g_previous.sa_sigaction != nullptr) {
      g_previous.sa_sigaction(sig, info, context);
      return;
    }
  } else if (g_previous.sa_handler != SIG_DFL && g_previous.sa_handler != SIG_IGN) {
    g_previous.sa_handler(sig);
    return;
  }
  // The default action: restored, then the fault happens again when this
  // returns; a SIGBUS sent by kill() or raise() is raised again.
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  ::sigaction(SIGBUS, &dfl, nullptr);
  if (info == nullptr || info->si_code <= 0) ::raise(sig);
}

void on_sigbus(int sig, siginfo_t* info, void* context) {
  if (info != nullptr && info->si_code > 0) {
    const auto at = reinterpret_cast<uintptr_t>(info->si_addr);
    for (Slot& s : g_slots) {
      const uintptr_t begin = s.begin.load(std::memory_order_acquire);
      if (begin == 0 || at < begin || at >= s.end.load(std::memory_order_acquire)) continue;
      // mmap is a plain system call on Linux, safe here.
      void* page = reinterpret_cast<void*>(at & ~(g_page - 1));
      if (::mmap(page, g_page, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) != MAP_FAILED) {
        s.shrank.store(true, std::memory_order_release);
        return;
      }
      break;
    }
  }
  pass_on(sig, info, context);
}

void install() {
  g_page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  struct sigaction sa {};
  sa.sa_sigaction = on_sigbus;
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigemptyset(&sa.sa_mask);
  ::sigaction(SIGBUS, &sa, &g_previous);
}

}  // namespace

int guard_mapping(const char* data, size_t size) {
  std::call_once(g_installed, install);
  for (int i = 0; i < kSlots; ++i) {
    bool expected = false;
    if (!g_slots[i].taken.compare_exchange_strong(expected, true)) continue;
    const auto begin = reinterpret_cast<uintptr_t>(data);
    g_slots[i].shrank.store(false);
    g_slots[i].end.store(begin + size, std::memory_order_release);
    g_slots[i].begin.store(begin, std::memory_order_release);
    return i;
  }
  return -1;
}

void unguard_mapping(int slot) {
  if (slot < 0 || slot >= kSlots) return;
  g_slots[slot].begin.store(0, std::memory_order_release);
  g_slots[slot].end.store(0, std::memory_order_release);
  g_slots[slot].taken.store(false, std::memory_order_release);
}

bool mapping_shrank(int slot) {
  return slot >= 0 && slot < kSlots && g_slots[slot].shrank.load(std::memory_order_acquire);
}

}  // namespace graphprobe::compare
