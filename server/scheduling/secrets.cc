#include "server/scheduling/secrets.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <cstdlib>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace parity::server {

std::string RandomBytes(size_t bytes) {
  std::string out(bytes, '\0');
  if (RAND_bytes(reinterpret_cast<unsigned char*>(out.data()), static_cast<int>(bytes)) != 1) {
    std::abort();  // no entropy: nothing secret can be made, and nothing should go on
  }
  return out;
}

std::string RandomSecret(absl::string_view prefix) {
  return absl::StrCat(prefix, Base64Url(RandomBytes(32)));
}

std::string Sha256(absl::string_view data) {
  std::string digest(32, '\0');
  unsigned int size = 0;
  EVP_Digest(data.data(), data.size(), reinterpret_cast<unsigned char*>(digest.data()), &size,
             EVP_sha256(), nullptr);
  return digest;
}

std::string HmacSha256(absl::string_view key, absl::string_view message) {
  std::string mac(32, '\0');
  unsigned int size = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
       reinterpret_cast<const unsigned char*>(message.data()), message.size(),
       reinterpret_cast<unsigned char*>(mac.data()), &size);
  return mac;
}

std::string Base64Url(absl::string_view bytes) {
  return absl::WebSafeBase64Escape(bytes);  // unpadded
}

bool ConstantTimeEquals(absl::string_view a, absl::string_view b) {
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

}  // namespace parity::server
