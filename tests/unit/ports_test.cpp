// Ports held per attempt and the interface that carries the instances' addresses
// (exec/local/ports.h).
#include "exec/local/ports.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

namespace ty::exec::local {
namespace {

TEST(Ports, AHeldPortIsRefusedToAPlainBind) {
  auto held = HeldPort::Hold();
  ASSERT_TRUE(held.ok()) << held.status().message();
  ASSERT_GT(held->port(), 0);
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(held->port()));
  EXPECT_NE(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ::close(fd);
}

TEST(Ports, TheInterfaceHoldingAnAddressOrAHostName) {
  EXPECT_EQ(InterfaceHolding("127.0.0.1"), "lo");
  EXPECT_EQ(InterfaceHolding("localhost"), "lo");
  EXPECT_EQ(InterfaceHolding("192.0.2.1"), "");  // a documentation address: no host holds it
  EXPECT_EQ(InterfaceHolding(""), "");
  EXPECT_EQ(InterfaceHolding("no-such-host.invalid"), "");
}

}  // namespace
}  // namespace ty::exec::local
