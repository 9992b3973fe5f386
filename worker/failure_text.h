// Engine text on its way into a run's failure (CompleteRun's status message), which every viewer
// of the sweep reads: the engine's error line and the tail of its log. A worker's paths and the
// sizes of its files are not theirs to read (issue #23: the failure told whether /etc/shadow
// existed and how large a file was), so before any of it leaves the worker
//   * each known path (the dataset file, --corpus-dir, --checkpoint-dir, --work-dir, the engine)
//     becomes its placeholder ("<dataset>", "<checkpoint-dir>", …), longest first;
//   * any other absolute path (a '/' that starts a word) becomes "<path>";
//   * a count of bytes ("4096 bytes", "4096 B") becomes "<n> bytes".
// The worker's own log keeps the text as it was. Pure; any thread.
#pragma once

#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace parity::worker {

struct KnownPath {
  std::string path;         // absolute; empty entries are ignored
  std::string placeholder;  // e.g. "<checkpoint-dir>"
};

std::string ScrubForViewers(absl::string_view text, std::vector<KnownPath> known);

}  // namespace parity::worker
