// The file that holds the first admin token (--bootstrap-token-file): read at start, or created
// when there is none. The token goes only into that file, never to the log or a terminal
// (journald, `kubectl logs` and a `2>&1` keep both), and the file is refused when anyone but its
// owner could read or replace it. The rule is PostgreSQL's for its TLS key: owned by the
// scheduler's user with no group or other access (0600 or less), or owned by root with no write
// by the group and nothing for others (0640 or less: a Kubernetes Secret mounted with fsGroup,
// files an administrator keeps). Symbolic links are followed when reading (Secret mounts are
// links) and the file they reach is checked; a new file is never written through one.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace parity::server {

// Where the scheduler writes a new admin token when --bootstrap-token-file is not given:
// XDG_STATE_HOME/parity/admin.token, else HOME/.local/state/parity/admin.token; empty when both
// are unset or empty (then the flag is needed). Arguments are the variables' values (may be null).
std::string DefaultBootstrapTokenFile(const char* xdg_state_home, const char* home);

// The token in `path` (its first line, trimmed). NOT_FOUND when the file does not exist;
// INVALID_ARGUMENT naming `flag`, the file, its mode or owner and the remedy when its access is
// too open, it is not a regular file, or it is empty.
absl::StatusOr<std::string> ReadBootstrapTokenFile(const std::string& path, const char* flag);

// Writes `token` into a new file `path` with mode 0600 (O_CREAT|O_EXCL|O_NOFOLLOW: an existing
// file or a planted link is never written through), creating missing parent directories with
// mode 0700. ALREADY_EXISTS when `path` exists; INVALID_ARGUMENT naming `flag` on other errors.
absl::Status CreateBootstrapTokenFile(const std::string& path, const std::string& token,
                                      const char* flag);

}  // namespace parity::server
