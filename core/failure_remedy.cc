#include "core/failure_remedy.h"

#include "absl/strings/ascii.h"

namespace parity::core {

std::string FailureClassName(v1::FailureClass failure_class) {
  if (failure_class == v1::FAILURE_CLASS_UNSPECIFIED) return "";
  std::string name = v1::FailureClass_Name(failure_class);
  if (name.empty()) return "unknown";  // a class newer than this binary
  const std::string prefix = "FAILURE_CLASS_";
  if (name.rfind(prefix, 0) == 0) name.erase(0, prefix.size());
  return absl::AsciiStrToLower(name);
}

std::string_view FailureRemedy(v1::FailureClass failure_class) {
  switch (failure_class) {
    case v1::FAILURE_CLASS_UNSPECIFIED:
      return "";
    case v1::FAILURE_CLASS_PREEMPTED:
      return "nothing to do: the run resumes on the next free worker; if workers keep being "
             "stopped, see why in their logs";
    case v1::FAILURE_CLASS_INFRASTRUCTURE:
      return "see the worker's log for the crash; the run is retried up to max_attempts";
    case v1::FAILURE_CLASS_OUT_OF_MEMORY:
      return "give it a worker with more memory, or lower training.batch_tokens or the model's "
             "size (parity plan shows the memory estimate)";
    case v1::FAILURE_CLASS_USER_ERROR:
      return "fix the spec or give the workers the dataset; see the message";
    case v1::FAILURE_CLASS_LEASE_EXPIRED:
      return "check that the worker is alive and reaches the scheduler (network, load); see the "
             "worker's log";
    case v1::FAILURE_CLASS_DIVERGED:
      return "lower training.learning_rate or lengthen the warmup; the same spec diverges again";
    case v1::FAILURE_CLASS_HUNG:
      return "check the worker's device and file system (a stuck read or GPU); see the worker's "
             "log";
    case v1::FAILURE_CLASS_INVALID_RESULT:
      return "the engine's summary does not match the plan: report it with the run's id and the "
             "worker's log";
    case v1::FAILURE_CLASS_DATA_MISMATCH:
      return "re-copy the dataset or pin data.dataset_digest";
    default:
      return "see the message and the worker's log";
  }
}

}  // namespace parity::core
