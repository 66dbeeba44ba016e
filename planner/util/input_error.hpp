#pragma once
// A problem the user can fix: a malformed number, an unknown name, an impossible shape, a size that does
// not fit in 64 bits. The `plan` command prints the message on one line and exits with status 2.
#include <stdexcept>

namespace trainplan {

class input_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace trainplan
