#include "writer/save_file.h"

#include <caffe2/serialize/inline_container.h>
#include <c10/util/Exception.h>
#include <torch/csrc/jit/serialization/pickle.h>

#include <string>

#include "format/pt_archive.h"

namespace graphprobe::writer {

bool writable_dtype(c10::ScalarType dtype) { return pt::dtype_by_c10_name(c10::toString(dtype)) != nullptr; }

void check_writable(const at::Tensor& x) {
  TORCH_CHECK_TYPE(writable_dtype(x.scalar_type()), "graphprobe.acl_save: a tensor of dtype ", x.scalar_type(),
                   " cannot be saved as a file torch.load reads (quantized and sub-byte integer dtypes are not "
                   "saved); convert it first, e.g. x.dequantize() or x.to(torch.uint8)");
}

std::vector<char> tensor_file_bytes(const at::Tensor& t) {
  const pt::DtypeInfo* d = pt::dtype_by_c10_name(c10::toString(t.scalar_type()));
  TORCH_CHECK_TYPE(d != nullptr, "graphprobe cannot write a tensor of dtype ", t.scalar_type(),
                   " as a file torch.load reads");
  if (d->legacy_storage != nullptr) return torch::jit::pickle_save(t);
  TORCH_CHECK(t.device().is_cpu() && t.is_contiguous(), "graphprobe: internal error: a saved tensor must be a "
              "contiguous CPU tensor by the time it is written");
  const std::string pickle = pt::tensor_pickle(*d, t.sizes().vec());
  std::vector<char> out;
  caffe2::serialize::PyTorchStreamWriter zip([&](const void* buf, size_t n) {
    const char* p = static_cast<const char*>(buf);
    out.insert(out.end(), p, p + n);
    return n;
  });
  zip.writeRecord("data.pkl", pickle.data(), pickle.size());
  // The tensor's own bytes from its first element: the pickle says storage
  // offset 0 and contiguous strides.
  zip.writeRecord("data/0", t.const_data_ptr(), t.nbytes());
  zip.writeEndOfFile();
  return out;
}

}  // namespace graphprobe::writer
