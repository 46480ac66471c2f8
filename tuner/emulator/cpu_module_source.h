/** \file tuner/emulator/cpu_module_source.h
 * Owns: the C++ source the CPU emulator hands the host compiler: which kernels share a library
 * (a chunk, one per compiler job; a kernel that includes headers alone), and each chunk's text
 * (every kernel in a namespace of its own with its -D values as #defines, `extern "C"` and
 * dynamic shared memory rewritten for the prelude, its launcher and signature exported), and
 * whether a chunk needs the compiler's alignment check.
 * Consumes: CpuKernel (cpu_emulator.h). Produces: text for CpuModule::build (cpu_emulator.cpp),
 * which compiles, loads and runs it.
 * Runs after: the variants' instantiation (check_job, generate --check); before: the host
 * compiler.
 * Must not: run the compiler, load a library or launch anything (cpu_emulator.cpp does). */
#pragma once

#include <cstddef>
#include <iosfwd>
#include <vector>

#include "tuner/emulator/cpu_emulator.h"

namespace gputune::tuner {

/// A misaligned vector access stops the launch with the kernel's line, as it faults on a GPU:
/// __ldg's vector loads report it themselves; a plain `*reinterpret_cast<const float4*>(p)` or
/// `((float4*)p)[i]` is checked by the compiler's alignment sanitizer, turned on for the chunks
/// whose kernels cast pointers (write_chunk says which).
inline constexpr const char* kAlignmentCheck = " -fsanitize=alignment -fsanitize-recover=alignment";

/// The kernels (by index) of each library: at most `jobs` libraries of kernels without includes,
/// and one of its own for each kernel that includes headers (a header with an include guard or
/// `#pragma once` is read once per translation unit, so the next kernel of the unit would not
/// see what it declares; NVRTC compiles each variant on its own, too).
std::vector<std::vector<std::size_t>> chunk_kernels(const std::vector<CpuKernel>& kernels,
                                                    int jobs);

/// Writes the source of the library holding `chunk`'s kernels, after the prelude's include;
/// true when one of them casts pointers (compile it with kAlignmentCheck).
bool write_chunk(std::ostream& out, const std::vector<CpuKernel>& kernels,
                 const std::vector<std::size_t>& chunk);

}  // namespace gputune::tuner
