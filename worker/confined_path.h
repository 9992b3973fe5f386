// Files a spec or a scheduler names, found only below a root directory the worker's operator
// configured (--corpus-dir, --checkpoint-dir), for the dataset resolver and the resume check.
//
// The walk opens each part with openat(O_PATH | O_NOFOLLOW) from the root's descriptor, so no
// part may be a symbolic link, "." or "..", and nothing outside the root is reached (the root
// itself may be a link: that is the operator's choice). O_PATH opens nothing for reading, so a
// FIFO does not block and a device is not touched before it is refused. Only a regular file is
// accepted. The path returned (the root's real path plus the parts) is what the engine opens; a
// race with someone who can write below the root is out of scope: only the operator can.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace parity::worker {

struct ConfinedFile {
  std::string path;   // absolute, below the root's real path
  int64_t bytes = 0;  // the file's size when it was checked
};

// The regular file at root/parts[0]/…/parts[n-1]. NOT_FOUND when a part does not exist;
// PERMISSION_DENIED when a part is a symbolic link, ".", "..", empty or holds a '/', or when the
// file is not a regular file (a device, a FIFO, a directory, a socket); FAILED_PRECONDITION when
// the root cannot be opened. Messages name the path: they are for the worker's log only.
absl::StatusOr<ConfinedFile> FindRegularFileBelow(const std::string& root,
                                                  const std::vector<absl::string_view>& parts);

}  // namespace parity::worker
