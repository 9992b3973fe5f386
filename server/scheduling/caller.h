// Who makes a call, as the API layer authenticated it (server/api/access_control.h). The
// scheduling logic needs only this much of an identity: the name that owns what it submits and
// holds what it leases (lease secrets are bound to it), and whether it may act on any sweep and
// above the priority ceiling (an admin). Role checks themselves are the API layer's, in one table.
#pragma once

#include <string>

namespace parity::server {

struct Caller {
  std::string name;
  bool admin = false;

  // The scheduler's own process (tests, seeders, benchmarks calling it directly): an admin
  // with no name.
  static Caller InProcess() { return Caller{"", true}; }
};

}  // namespace parity::server
