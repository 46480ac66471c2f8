/** \file variants/cuda_parse.h
 * Owns: parsing CUDA device code with Clang libTooling (clang 14) the way NVRTC sees it: no CUDA
 * headers (`-nocudainc -nocudalib`), a small prelude declaring NVRTC's builtins, the -D/-U/-I/-std
 * options of the job, `#line 1` so diagnostics name the user's file and line. Shared by the naive
 * kernel generator (variants/naive/analysis.cpp) and the traffic analysis (pruner/traffic/).
 * Must not: run anything. Only -fno-rtti targets include this header (it exposes clang types). */
#pragma once

#include <clang/AST/Decl.h>
#include <clang/Frontend/ASTUnit.h>

#include <memory>
#include <string>
#include <vector>

namespace gputune {

/// Resource directory of clang 14 (its CUDA builtin headers): $GPUTUNE_CLANG_RESOURCE_DIR, else
/// the one found at configure time.
std::string clang_resource_dir();

/// Lines the prelude adds before the user's source (offsets into the parsed buffer start after it).
const std::string& cuda_prelude();

struct ParsedCuda {
  std::unique_ptr<clang::ASTUnit> ast;  ///< null when parsing failed
  std::string error;                    ///< first error, "file:line:col: message"
  std::vector<std::string> notes;       ///< what clang calls an error and nvcc does not (below)
};

/// Parses `source` (named `file_name` in messages) with the compile options that matter to the
/// front end (-D, -U, -I, -std). Any error makes `ast` null, except where clang is stricter than
/// nvcc and NVRTC: `#pragma unroll 0` (Kernel Tuner's `loop_unroll_factor_*` = 0) is a warning
/// there and the pragma is ignored, so here too, with a note.
ParsedCuda parse_cuda(const std::string& source, const std::vector<std::string>& options,
                      const std::string& file_name, const std::string& tool_name);

/// The __global__ function with a body named `name`, searched through namespaces and extern "C";
/// for "f<float>", the instance of template f (parsed with instance_reference appended).
const clang::FunctionDecl* find_kernel(clang::ASTContext& ctx, const std::string& name);

/// For a template's instance ("reduce<float>"): a line to append to the source so that clang
/// instantiates it and find_kernel finds it; empty for a plain name.
std::string instance_reference(const std::string& name);

/// Names of every __global__ function with a body (for "did you mean" messages).
std::vector<std::string> kernel_names(clang::ASTContext& ctx);

}  // namespace gputune
