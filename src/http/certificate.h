// The listener's certificate when no one supplies one: a self-signed certificate made once and kept
// with the state, and the SHA-256 fingerprint a person compares a client's view against. OpenSSL
// stays inside certificate.cpp.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "http/server.h"

namespace ty::http {

// The certificate in `dir` (certificate.pem, key.pem), made on the first call and reused by every
// later one, so a restart keeps the fingerprint clients trust. A new one is a P-256 key
// (key.pem mode 0600 in a 0700 directory, written before the certificate, each by rename) and a
// self-signed certificate valid from `now_unix` for ten years, naming `names` (DNS names and IP
// addresses) in its subjectAltName, the first also its common name. REQUIRES: names not empty.
StatusOr<TlsFiles> EnsureSelfSignedCertificate(const std::string& dir, const std::vector<std::string>& names,
                                               int64_t now_unix);

// "AB:12:...": the SHA-256 of the first certificate in the PEM file, as `openssl x509
// -fingerprint -sha256` prints it.
StatusOr<std::string> CertificateFingerprint(const std::string& certificate_file);

// The names of `names` that the PEM certificate does not cover (DNS names matched as a client
// would, wildcards included; IP addresses exactly).
StatusOr<std::vector<std::string>> NamesNotCovered(const std::string& certificate_file,
                                                   const std::vector<std::string>& names);

// The reason for the last OpenSSL failure (and clears OpenSSL's error queue), for a message a
// person reads.
std::string OpenSslReason();

}  // namespace ty::http
