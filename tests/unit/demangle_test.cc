// C++ names within a bound (hal/demangle.h): a short symbol of nested templates whose demangled
// form is exponential in its length stays mangled, at once; real long names demangle whole.
#include "hal/demangle.h"

#include <gtest/gtest.h>

namespace ingero::hal {
namespace {

// `bomb<P<P<...P<L,L>...>>>`, 23 levels, each P<T, T> naming the level below twice: 222 bytes
// mangled, 109 MB demangled (helper-72: 1.8 GB of the tracer's memory and 70 s, then a trace
// whose kernel names every query refused as too big).
const std::string kBomb =
    "_Z27__wrapper__device_stub_bombI1PIS0_IS0_IS0_IS0_IS0_IS0_IS0_IS0_IS0_IS0_IS0_IS0_IS0_IS0_"
    "IS0_IS0_IS0_IS0_IS0_IS0_IS0_IS0_I1LS1_ES2_ES3_ES4_ES5_ES6_ES7_ES8_ES9_ESA_ESB_ESC_ESD_ESE_"
    "ESF_ESG_ESH_ESI_ESJ_ESK_ESL_ESM_ESN_EEvRT_";

TEST(Demangle, ANameThatWouldPassTheBoundStaysMangledAtOnce) {
  const std::string& sym = kBomb;
  EXPECT_EQ(demangle(sym), sym);
  EXPECT_EQ(demangle(sym + "+0x10"), sym + "+0x10");
}

TEST(Demangle, ALongRealNameDemanglesWhole) {
  EXPECT_EQ(demangle("_ZN2at6native18elementwise_kernelILi128ELi4EZNS0_22gpu_kernel_impl_"
                     "nocastIZZZNS0_21copy_device_to_deviceERNS_14TensorIteratorEbbENKUlvE0_"
                     "clEvENKUlvE12_clEvEUlN3c104HalfEE_EEvRNS_18TensorIteratorBaseERKT_EUliE_"
                     "EEviT1_"),
            "void at::native::elementwise_kernel<128, 4, at::native::gpu_kernel_impl_nocast<"
            "at::native::copy_device_to_device(at::TensorIterator&, bool, bool)::{lambda()#2}::"
            "operator()() const::{lambda()#14}::operator()() const::{lambda(c10::Half)#1}>(at::"
            "TensorIteratorBase&, at::native::copy_device_to_device(at::TensorIterator&, bool, "
            "bool)::{lambda()#2}::operator()() const::{lambda()#14}::operator()() const::{lambda("
            "c10::Half)#1} const&)::{lambda(int)#1}>(int, at::native::gpu_kernel_impl_nocast<at::"
            "native::copy_device_to_device(at::TensorIterator&, bool, bool)::{lambda()#2}::"
            "operator()() const::{lambda()#14}::operator()() const::{lambda(c10::Half)#1}>(at::"
            "TensorIteratorBase&, at::native::copy_device_to_device(at::TensorIterator&, bool, "
            "bool)::{lambda()#2}::operator()() const::{lambda()#14}::operator()() const::{lambda("
            "c10::Half)#1} const&)::{lambda(int)#1})");
}

}  // namespace
}  // namespace ingero::hal
