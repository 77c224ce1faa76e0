// PLACEHOLDER (being written): the math family's op self-test cases.
#include "selftest/op_selftest.h"

namespace ts::selftest {

void addMathCases(std::vector<Case>& /*out*/) {}

}  // namespace ts::selftest
