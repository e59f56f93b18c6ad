#include "exec/local/ports.h"

#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

namespace ty::exec::local {

StatusOr<HeldPort> HeldPort::Hold() {
  // IPv4 any-address: a listener on 0.0.0.0, on "::" (dual stack) or on one loopback address
  // of the port conflicts with it unless it sets SO_REUSEADDR.
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Unavailable(std::string("cannot open a socket to hold a port: ") + std::strerror(errno));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_ANY);
  a.sin_port = 0;
  socklen_t len = sizeof a;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    std::string why = std::strerror(errno);
    ::close(fd);
    return Unavailable("cannot hold a free port: " + why);
  }
  // Only now: bound without it, the kernel gave a port nobody held; with it, the instance's own
  // SO_REUSEADDR listener may share the port with this never-listening socket.
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  return HeldPort(ntohs(a.sin_port), fd);
}

HeldPort& HeldPort::operator=(HeldPort&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    port_ = o.port_;
    fd_ = o.fd_;
    o.fd_ = -1;
  }
  return *this;
}

HeldPort::~HeldPort() {
  if (fd_ >= 0) ::close(fd_);
}

int ParsePort(const std::string& text) {
  if (text.empty() || text.size() > 5 || text.find_first_not_of("0123456789") != std::string::npos) return 0;
  int p = std::stoi(text);
  return p >= 1 && p <= 65535 ? p : 0;
}

std::string InterfaceHolding(const std::string& address) {
  // A host name (Slurm's NodeAddr defaults to the node's name) stands for its IPv4 addresses.
  std::vector<in_addr_t> wanted;
  addrinfo hints{};
  hints.ai_family = AF_INET;
  addrinfo* found = nullptr;
  if (address.empty() || ::getaddrinfo(address.c_str(), nullptr, &hints, &found) != 0) return "";
  for (addrinfo* a = found; a; a = a->ai_next)
    wanted.push_back(reinterpret_cast<const sockaddr_in*>(a->ai_addr)->sin_addr.s_addr);
  ::freeaddrinfo(found);
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return "";
  std::string name;
  for (ifaddrs* i = list; i && name.empty(); i = i->ifa_next)
    if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET &&
        std::count(wanted.begin(), wanted.end(), reinterpret_cast<const sockaddr_in*>(i->ifa_addr)->sin_addr.s_addr))
      name = i->ifa_name;
  ::freeifaddrs(list);
  return name;
}

}  // namespace ty::exec::local
