// PLACEHOLDER (being written): the attention family's op self-test cases.
#include "selftest/op_selftest.h"

namespace ts::selftest {

void addAttentionCases(std::vector<Case>& /*out*/) {}

}  // namespace ts::selftest
