// PLACEHOLDER (being written): the exl3 family's op self-test cases.
#include "selftest/op_selftest.h"

namespace ts::selftest {

void addExl3Cases(std::vector<Case>& /*out*/) {}

}  // namespace ts::selftest
