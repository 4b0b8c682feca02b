// A small XLA FFI handler and a legacy CPU custom call for tests/test_custom_call_targets.py,
// compiled there with the machine's g++ against jaxlib's own headers (jaxlib/include).
#include <cstddef>
#include <cstdint>

#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

// y = x * factor + 1 (factor an FFI attribute), elementwise over f32.
static ffi::Error ScaleAddImpl(ffi::Buffer<ffi::F32> x, ffi::ResultBuffer<ffi::F32> y, float factor) {
  const std::size_t n = x.element_count();
  const float* in = x.typed_data();
  float* out = y->typed_data();
  for (std::size_t i = 0; i < n; ++i) out[i] = in[i] * factor + 1.0f;
  return ffi::Error::Success();
}

XLA_FFI_DEFINE_HANDLER_SYMBOL(ScaleAdd, ScaleAddImpl,
                              ffi::Ffi::Bind().Arg<ffi::Buffer<ffi::F32>>().Ret<ffi::Buffer<ffi::F32>>().Attr<float>("factor"));

// The legacy CPU signature: out = in0 - in1 over 4 int32 values.
extern "C" void LegacySub4(void* out, const void** in) {
  const std::int32_t* a = static_cast<const std::int32_t*>(in[0]);
  const std::int32_t* b = static_cast<const std::int32_t*>(in[1]);
  std::int32_t* o = static_cast<std::int32_t*>(out);
  for (int i = 0; i < 4; ++i) o[i] = a[i] - b[i];
}
