/** \file variants/hash.h
 * Owns: content hashes (SHA-256, hex) that identify kernels, variants, contexts and jobs across
 * databases from several machines (row ids stay local); base64 for bytes carried in JSON. Both
 * through OpenSSL.
 * Must not: know about CUDA or storage. */
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace gputune {

/// Lower-case hex SHA-256 of the bytes.
std::string sha256_hex(std::string_view bytes);

/// Standard base64 (RFC 4648, with padding, no line breaks).
std::string base64_encode(std::string_view bytes);
/// The bytes of standard base64 text; nothing when it is not base64.
std::optional<std::string> base64_decode(std::string_view text);

}  // namespace gputune
