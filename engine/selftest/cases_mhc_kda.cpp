// PLACEHOLDER (being written): the mhc_kda family's op self-test cases.
#include "selftest/op_selftest.h"

namespace ts::selftest {

void addMhcKdaCases(std::vector<Case>& /*out*/) {}

}  // namespace ts::selftest
