// PLACEHOLDER (being written): the moe family's op self-test cases.
#include "selftest/op_selftest.h"

namespace ts::selftest {

void addMoeCases(std::vector<Case>& /*out*/) {}

}  // namespace ts::selftest
