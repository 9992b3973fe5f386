// The scheduler's few cryptographic needs, on OpenSSL: random secrets (bearer tokens, keys),
// SHA-256 (tokens are stored as their hash) and HMAC-SHA-256 (lease secrets are signatures the
// scheduler can check without storing them). Constant-time comparison for anything secret.
#pragma once

#include <string>

#include "absl/strings/string_view.h"

namespace parity::server {

// `bytes` bytes from the OS's cryptographic generator (RAND_bytes); aborts if it fails, which
// OpenSSL allows only when the OS cannot supply entropy.
std::string RandomBytes(size_t bytes);
// `prefix` then 32 random bytes as unpadded web-safe base64 (43 characters).
std::string RandomSecret(absl::string_view prefix);
// Raw 32-byte digests.
std::string Sha256(absl::string_view data);
std::string HmacSha256(absl::string_view key, absl::string_view message);
// Unpadded web-safe base64.
std::string Base64Url(absl::string_view bytes);
// Equality whose time does not depend on where the inputs differ (only on their lengths).
bool ConstantTimeEquals(absl::string_view a, absl::string_view b);

}  // namespace parity::server
