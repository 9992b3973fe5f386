// What a researcher reads when a run fails: the failure class in the specs' lowercase spelling
// ("user_error", not FAILURE_CLASS_USER_ERROR) and what to do about it. The one table of
// remedies: the CLI prints it (status, watch, results, submit --wait) and the dashboard's
// web/src/failures.js carries the same sentences (web_test checks that they agree).
#pragma once

#include <string>
#include <string_view>

#include "parity/v1/run.pb.h"

namespace parity::core {

// "user_error", "data_mismatch", ...; "" for FAILURE_CLASS_UNSPECIFIED.
std::string FailureClassName(v1::FailureClass failure_class);

// One sentence: what to do about a failure of this class; "" for FAILURE_CLASS_UNSPECIFIED.
std::string_view FailureRemedy(v1::FailureClass failure_class);

}  // namespace parity::core
