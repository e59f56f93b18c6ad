// Outbound calls (docs/security.md, "Outbound calls"): the addresses an EventBridge API
// destination may reach. Refused unless the operator allows them ([events]
// allow_local_endpoints): the unspecified addresses (0.0.0.0/8, ::), loopback (127.0.0.0/8, ::1),
// link-local (169.254.0.0/16, with the cloud metadata address, and fe80::/10), the same in
// IPv4-mapped, IPv4-compatible and NAT64 (64:ff9b::/96) IPv6, and the server's own listener ports
// on this host's addresses. Checked twice: on the URL when the destination is made (a literal
// address or a localhost name), and on each address a delivery connects to, after name
// resolution, so a name that resolves elsewhere later (DNS rebinding) cannot pass. A
// configuration-file webhook is the operator's own and is not checked. Pure: the caller gathers
// the host's addresses and its ports.
#pragma once

#include <sys/socket.h>

#include <string>
#include <vector>

#include "core/status.h"

namespace ty::obs {

struct OutboundRules {
  bool allow_local = false;                // [events] allow_local_endpoints: allows everything below
  std::vector<int> own_ports;              // the server's listeners
  std::vector<std::string> own_addresses;  // this host's interface addresses, as inet_ntop writes them
};

// Ok, or AccessDenied saying which rule refuses `addr`:`port` (an AF_INET or AF_INET6 address).
Status CheckOutboundAddress(const sockaddr* addr, const OutboundRules& rules);

// At CreateApiDestination: InvalidArgument naming InvocationEndpoint when the URL does not parse,
// its scheme is not http or https, or its host is a localhost name or a literal address the rules
// refuse. A host name is checked at delivery, on what it resolves to.
Status CheckOutboundUrl(const std::string& url, const OutboundRules& rules);

}  // namespace ty::obs
