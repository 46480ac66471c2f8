/** \file variants/hash.h
 * Owns: content hashes (SHA-256, hex) that identify kernels, variants, contexts and jobs across
 * databases from several machines (row ids stay local).
 * Must not: know about CUDA or storage. */
#pragma once

#include <string>
#include <string_view>

namespace gputune {

/// Lower-case hex SHA-256 of the bytes.
std::string sha256_hex(std::string_view bytes);

}  // namespace gputune
