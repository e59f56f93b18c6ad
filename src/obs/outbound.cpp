#include "obs/outbound.h"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <netinet/in.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <memory>

#include "core/strings.h"

namespace ty::obs {

namespace {

// Why an IPv4 address (network order bytes) is local, or nullptr.
const char* LocalV4(const uint8_t* a) {
  if (a[0] == 0) return "an unspecified address (0.0.0.0/8)";
  if (a[0] == 127) return "a loopback address (127.0.0.0/8)";
  if (a[0] == 169 && a[1] == 254) return "a link-local address (169.254.0.0/16, the metadata service's included)";
  return nullptr;
}

// Why an IPv6 address is local, or nullptr; IPv4 carried in IPv6 is judged as IPv4.
const char* LocalV6(const uint8_t* a) {
  static constexpr uint8_t kZero[16] = {};
  static constexpr uint8_t kMapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  static constexpr uint8_t kNat64[12] = {0, 0x64, 0xff, 0x9b, 0, 0, 0, 0, 0, 0, 0, 0};
  if (std::memcmp(a, kZero, 16) == 0) return "an unspecified address (::)";
  if (std::memcmp(a, kZero, 15) == 0 && a[15] == 1) return "a loopback address (::1)";
  if (a[0] == 0xfe && (a[1] & 0xc0) == 0x80) return "a link-local address (fe80::/10)";
  if (std::memcmp(a, kMapped, 12) == 0 || std::memcmp(a, kZero, 12) == 0 || std::memcmp(a, kNat64, 12) == 0)
    return LocalV4(a + 12);
  return nullptr;
}

struct UrlFree {
  void operator()(CURLU* u) const { curl_url_cleanup(u); }
};
struct CurlFree {
  void operator()(char* p) const { curl_free(p); }
};

StatusOr<std::string> UrlPart(CURLU* u, CURLUPart part, unsigned flags = 0) {
  char* raw = nullptr;
  if (curl_url_get(u, part, &raw, flags) != CURLUE_OK || !raw) return InvalidArgument("missing");
  std::unique_ptr<char, CurlFree> owned(raw);
  return std::string(raw);
}

}  // namespace

Status CheckOutboundAddress(const sockaddr* addr, const OutboundRules& rules) {
  if (rules.allow_local) return Status::Ok();
  const char* why = nullptr;
  int port = 0;
  char text[INET6_ADDRSTRLEN] = {};
  if (addr->sa_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(addr);
    why = LocalV4(reinterpret_cast<const uint8_t*>(&in->sin_addr));
    port = ntohs(in->sin_port);
    inet_ntop(AF_INET, &in->sin_addr, text, sizeof text);
  } else if (addr->sa_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(addr);
    why = LocalV6(reinterpret_cast<const uint8_t*>(&in6->sin6_addr));
    port = ntohs(in6->sin6_port);
    inet_ntop(AF_INET6, &in6->sin6_addr, text, sizeof text);
  } else {
    return Status(Code::kAccessDenied, "only IPv4 and IPv6 addresses may be reached");
  }
  if (why)
    return Status(Code::kAccessDenied, std::string(text) + " is " + why +
                                           ", which API destinations may not reach ([events] allow_local_endpoints)");
  const bool own_port = std::find(rules.own_ports.begin(), rules.own_ports.end(), port) != rules.own_ports.end();
  if (own_port && std::find(rules.own_addresses.begin(), rules.own_addresses.end(), text) != rules.own_addresses.end())
    return Status(Code::kAccessDenied, std::string(text) + " port " + std::to_string(port) +
                                           " is this server's own listener, which API destinations may not reach "
                                           "([events] allow_local_endpoints)");
  return Status::Ok();
}

Status CheckOutboundUrl(const std::string& url, const OutboundRules& rules) {
  std::unique_ptr<CURLU, UrlFree> u(curl_url());
  if (!u || curl_url_set(u.get(), CURLUPART_URL, url.c_str(), CURLU_NON_SUPPORT_SCHEME) != CURLUE_OK)
    return InvalidArgument("InvocationEndpoint: '" + url + "' is not a URL");
  auto scheme = UrlPart(u.get(), CURLUPART_SCHEME);
  if (!scheme.ok() || (*scheme != "http" && *scheme != "https"))
    return InvalidArgument("InvocationEndpoint: must be an https:// (or http://) URL");
  auto host = UrlPart(u.get(), CURLUPART_HOST);
  if (!host.ok() || host->empty()) return InvalidArgument("InvocationEndpoint: names no host");
  auto port_text = UrlPart(u.get(), CURLUPART_PORT, CURLU_DEFAULT_PORT);
  const int port = port_text.ok() ? std::atoi(port_text->c_str()) : 0;
  if (rules.allow_local) return Status::Ok();
  std::string name = ToLower(*host);
  while (!name.empty() && name.back() == '.') name.pop_back();
  if (name == "localhost" || EndsWith(name, ".localhost") || name == "localhost.localdomain")
    return InvalidArgument("InvocationEndpoint: " + *host +
                           " names this host, which API destinations may not reach ([events] allow_local_endpoints)");
  // curl writes an IPv6 literal in brackets and normalizes IPv4 numbers (127.1, 0x7f000001).
  if (name.size() > 2 && name.front() == '[') name = name.substr(1, name.find_first_of("%]") - 1);
  sockaddr_storage ss{};
  if (inet_pton(AF_INET, name.c_str(), &reinterpret_cast<sockaddr_in*>(&ss)->sin_addr) == 1) {
    ss.ss_family = AF_INET;
    reinterpret_cast<sockaddr_in*>(&ss)->sin_port = htons(static_cast<uint16_t>(port));
  } else if (inet_pton(AF_INET6, name.c_str(), &reinterpret_cast<sockaddr_in6*>(&ss)->sin6_addr) == 1) {
    ss.ss_family = AF_INET6;
    reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port = htons(static_cast<uint16_t>(port));
  } else {
    return Status::Ok();  // a name: checked on what it resolves to, at each delivery
  }
  Status st = CheckOutboundAddress(reinterpret_cast<const sockaddr*>(&ss), rules);
  if (!st.ok()) return InvalidArgument("InvocationEndpoint: " + st.message());
  return Status::Ok();
}

}  // namespace ty::obs
