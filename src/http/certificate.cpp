#include "http/certificate.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>
#include <set>

namespace ty::http {

namespace fs = std::filesystem;

namespace {

template <auto Free>
struct Deleter {
  template <typename T>
  void operator()(T* p) const {
    Free(p);
  }
};
using PkeyPtr = std::unique_ptr<EVP_PKEY, Deleter<EVP_PKEY_free>>;
using X509Ptr = std::unique_ptr<X509, Deleter<X509_free>>;
using BioPtr = std::unique_ptr<BIO, Deleter<BIO_free_all>>;
using BnPtr = std::unique_ptr<BIGNUM, Deleter<BN_free>>;
using ExtPtr = std::unique_ptr<X509_EXTENSION, Deleter<X509_EXTENSION_free>>;


bool IsIpAddress(const std::string& name) {
  unsigned char buf[sizeof(in6_addr)];
  return inet_pton(AF_INET, name.c_str(), buf) == 1 || inet_pton(AF_INET6, name.c_str(), buf) == 1;
}

// A DNS name that can go into an extension's configuration text as it is.
bool IsDnsName(const std::string& name) {
  if (name.empty() || name.size() > 253) return false;
  for (char c : name)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '*')) return false;
  return true;
}

// Writes `data` to `path` through a temporary file in the same directory: a crash leaves the old
// file or the new one, never a part.
Status WriteFileAtomically(const std::string& path, const std::string& data, mode_t mode) {
  std::string tmp = path + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  if (fd < 0) return Internal("cannot write " + tmp + ": " + std::strerror(errno));
  bool ok = ::fchmod(fd, mode) == 0 && ::write(fd, data.data(), data.size()) == static_cast<ssize_t>(data.size()) &&
            ::fsync(fd) == 0;
  int saved = errno;
  ::close(fd);
  if (!ok || ::rename(tmp.c_str(), path.c_str()) != 0) {
    if (ok) saved = errno;
    ::unlink(tmp.c_str());
    return Internal("cannot write " + path + ": " + std::strerror(saved));
  }
  return Status::Ok();
}

StatusOr<std::string> Pem(const std::function<int(BIO*)>& write) {
  BioPtr bio(BIO_new(BIO_s_mem()));
  if (!bio || write(bio.get()) != 1) return Internal("cannot encode PEM: " + OpenSslReason());
  char* data = nullptr;
  long n = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<size_t>(n));
}

Status AddExtension(X509* cert, X509V3_CTX* ctx, int nid, const std::string& value) {
  ExtPtr ext(X509V3_EXT_conf_nid(nullptr, ctx, nid, value.c_str()));
  if (!ext || X509_add_ext(cert, ext.get(), -1) != 1)
    return Internal("cannot add the certificate extension " + std::string(OBJ_nid2sn(nid)) + ": " + OpenSslReason());
  return Status::Ok();
}

StatusOr<X509Ptr> ReadCertificate(const std::string& path) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) return InvalidArgument("the certificate " + path + " does not exist or is not a file");
  BioPtr bio(BIO_new_file(path.c_str(), "r"));
  if (!bio) return InvalidArgument("cannot open the certificate " + path + ": " + OpenSslReason());
  X509Ptr cert(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
  if (!cert) return InvalidArgument("no PEM certificate in " + path + ": " + OpenSslReason());
  return cert;
}

}  // namespace

StatusOr<TlsFiles> EnsureSelfSignedCertificate(const std::string& dir, const std::vector<std::string>& names,
                                               int64_t now_unix) {
  TlsFiles files{dir + "/certificate.pem", dir + "/key.pem"};
  std::error_code ec;
  if (fs::exists(files.certificate_file, ec) && fs::exists(files.key_file, ec)) return files;

  fs::create_directories(dir, ec);
  if (ec) return Internal("cannot create " + dir + ": " + ec.message());
  if (::chmod(dir.c_str(), 0700) != 0) return Internal("cannot make " + dir + " private: " + std::strerror(errno));

  ERR_clear_error();
  PkeyPtr key(EVP_EC_gen("P-256"));
  if (!key) return Internal("cannot generate a P-256 key: " + OpenSslReason());
  X509Ptr cert(X509_new());
  if (!cert) return Internal("cannot make a certificate: " + OpenSslReason());
  // A random positive 127-bit serial (RFC 5280: at most 20 octets, unpredictable).
  unsigned char serial[16];
  if (RAND_bytes(serial, sizeof serial) != 1) return Internal("no randomness for a serial: " + OpenSslReason());
  serial[0] &= 0x7f;
  BnPtr bn(BN_bin2bn(serial, sizeof serial, nullptr));
  if (!bn || !BN_to_ASN1_INTEGER(bn.get(), X509_get_serialNumber(cert.get())))
    return Internal("cannot set the serial: " + OpenSslReason());
  X509_set_version(cert.get(), 2);
  ASN1_TIME_set(X509_getm_notBefore(cert.get()), static_cast<time_t>(now_unix));
  ASN1_TIME_adj(X509_getm_notAfter(cert.get()), static_cast<time_t>(now_unix), 3650, 0);
  X509_NAME* subject = X509_get_subject_name(cert.get());
  X509_NAME_add_entry_by_txt(subject, "O", MBSTRING_ASC, reinterpret_cast<const unsigned char*>("trainyard"), -1, -1, 0);
  X509_NAME_add_entry_by_txt(subject, "CN", MBSTRING_ASC, reinterpret_cast<const unsigned char*>(names.front().c_str()),
                             -1, -1, 0);
  X509_set_issuer_name(cert.get(), subject);
  if (X509_set_pubkey(cert.get(), key.get()) != 1) return Internal("cannot set the public key: " + OpenSslReason());

  std::string alt;
  std::set<std::string> seen;
  for (const auto& name : names) {
    std::string entry = IsIpAddress(name) ? "IP:" + name : IsDnsName(name) ? "DNS:" + name : "";
    if (entry.empty() || !seen.insert(entry).second) continue;
    alt += (alt.empty() ? "" : ",") + entry;
  }
  // An end-entity certificate that trusts itself: not a CA, and no keyUsage (one without
  // keyCertSign would stop verifiers from accepting its own signature on itself).
  X509V3_CTX ctx;
  X509V3_set_ctx(&ctx, cert.get(), cert.get(), nullptr, nullptr, 0);
  TY_RETURN_IF_ERROR(AddExtension(cert.get(), &ctx, NID_basic_constraints, "critical,CA:FALSE"));
  TY_RETURN_IF_ERROR(AddExtension(cert.get(), &ctx, NID_subject_key_identifier, "hash"));
  TY_RETURN_IF_ERROR(AddExtension(cert.get(), &ctx, NID_authority_key_identifier, "keyid:always"));
  TY_RETURN_IF_ERROR(AddExtension(cert.get(), &ctx, NID_ext_key_usage, "serverAuth"));
  TY_RETURN_IF_ERROR(AddExtension(cert.get(), &ctx, NID_subject_alt_name, alt));
  if (X509_sign(cert.get(), key.get(), EVP_sha256()) <= 0) return Internal("cannot sign the certificate: " + OpenSslReason());

  auto key_pem = Pem([&](BIO* b) { return PEM_write_bio_PrivateKey(b, key.get(), nullptr, nullptr, 0, nullptr, nullptr); });
  if (!key_pem.ok()) return key_pem.status();
  auto cert_pem = Pem([&](BIO* b) { return PEM_write_bio_X509(b, cert.get()); });
  if (!cert_pem.ok()) return cert_pem.status();
  // The key first: a certificate on disk always has its key beside it.
  TY_RETURN_IF_ERROR(WriteFileAtomically(files.key_file, *key_pem, 0600));
  TY_RETURN_IF_ERROR(WriteFileAtomically(files.certificate_file, *cert_pem, 0644));
  return files;
}

StatusOr<std::string> CertificateFingerprint(const std::string& certificate_file) {
  auto cert = ReadCertificate(certificate_file);
  if (!cert.ok()) return cert.status();
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  if (X509_digest(cert->get(), EVP_sha256(), md, &n) != 1) return Internal("cannot hash the certificate: " + OpenSslReason());
  static const char* kHex = "0123456789ABCDEF";
  std::string out;
  for (unsigned int i = 0; i < n; ++i) {
    if (i > 0) out += ':';
    out += kHex[md[i] >> 4];
    out += kHex[md[i] & 0xf];
  }
  return out;
}

StatusOr<std::vector<std::string>> NamesNotCovered(const std::string& certificate_file,
                                                   const std::vector<std::string>& names) {
  auto cert = ReadCertificate(certificate_file);
  if (!cert.ok()) return cert.status();
  std::vector<std::string> out;
  for (const auto& name : names) {
    int ok = IsIpAddress(name) ? X509_check_ip_asc(cert->get(), name.c_str(), 0)
                               : X509_check_host(cert->get(), name.data(), name.size(), 0, nullptr);
    if (ok != 1) out.push_back(name);
  }
  ERR_clear_error();
  return out;
}

std::string OpenSslReason() {
  unsigned long e = ERR_get_error();
  ERR_clear_error();
  if (e == 0) return "unknown error";
  char buf[256];
  ERR_error_string_n(e, buf, sizeof buf);
  return buf;
}

}  // namespace ty::http
