// TCP ports an attempt's instances listen on (torch's rendezvous, the MPI remote shell), chosen
// free per attempt so that any number of distributed jobs share a host.
//
// The kernel picks a port no socket holds (bind to port 0); the supervisor keeps that socket
// bound, never listening, with SO_REUSEADDR set after the bind, until it ends. While it is held
// the port is nobody else's: another bind to port 0 skips it, and a bind without SO_REUSEADDR is
// refused. The instance's listener (torch's TCPStore and the launcher's shell set SO_REUSEADDR)
// binds it beside the held socket, which is allowed while the held one does not listen.
#pragma once

#include <string>

#include "core/status.h"

namespace ty::exec::local {

class HeldPort {
 public:
  // A free port of this host, held until this object is gone. Unavailable when no socket could
  // be bound.
  static StatusOr<HeldPort> Hold();
  HeldPort(HeldPort&& o) noexcept : port_(o.port_), fd_(o.fd_) { o.fd_ = -1; }
  HeldPort& operator=(HeldPort&& o) noexcept;
  HeldPort(const HeldPort&) = delete;
  HeldPort& operator=(const HeldPort&) = delete;
  ~HeldPort();

  int port() const { return port_; }

 private:
  HeldPort(int port, int fd) : port_(port), fd_(fd) {}
  int port_ = 0;
  int fd_ = -1;
};

// The port number in `text` (1..65535, digits only); 0 when it is not one.
int ParsePort(const std::string& text);

// The name of this host's network interface that holds `address` (an IPv4 address, or a host
// name for its IPv4 addresses), e.g. "eth0", "ib0", "lo"; "" when none does.
std::string InterfaceHolding(const std::string& address);

}  // namespace ty::exec::local
