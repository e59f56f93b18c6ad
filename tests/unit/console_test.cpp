// The console's sessions, cookies and cross-site rules (api/console.h), and its file table.
#include "api/console.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "http/server.h"

namespace ty::api {
namespace {

constexpr int64_t kHour = 3600 * 1000;

TEST(ConsoleSessions, FindsItsOwnCookieOnlyUntilItExpires) {
  ConsoleSessions sessions(8 * kHour, kHour, 100);
  std::string cookie;
  ConsoleSession s = sessions.Create("AKIAEXAMPLE", 1000, &cookie);
  EXPECT_EQ(cookie.size(), 64u);
  EXPECT_EQ(s.csrf_token.size(), 64u);
  EXPECT_NE(s.csrf_token, cookie);
  auto found = sessions.Find(cookie, 1000 + kHour / 2);
  ASSERT_TRUE(found);
  EXPECT_EQ(found->access_key_id, "AKIAEXAMPLE");
  EXPECT_EQ(found->csrf_token, s.csrf_token);
  // Another value of the same shape, or a prefix, finds nothing.
  std::string other = cookie;
  other[0] = other[0] == 'a' ? 'b' : 'a';
  EXPECT_FALSE(sessions.Find(other, 1000));
  EXPECT_FALSE(sessions.Find(cookie.substr(0, 32), 1000));
  EXPECT_FALSE(sessions.Find("", 1000));
  // Used every half hour it lives to its lifetime, then is gone.
  for (int64_t t = 1000; t < 1000 + 8 * kHour; t += kHour / 2) EXPECT_TRUE(sessions.Find(cookie, t)) << t;
  EXPECT_FALSE(sessions.Find(cookie, 1000 + 8 * kHour));
  EXPECT_EQ(sessions.size(), 0u);
}

TEST(ConsoleSessions, EndsWhenIdleSignedOutOrItsKeyGoes) {
  ConsoleSessions sessions(8 * kHour, kHour, 100);
  std::string a, b, c;
  sessions.Create("K1", 0, &a);
  sessions.Create("K2", 0, &b);
  sessions.Create("K2", 0, &c);
  EXPECT_FALSE(sessions.Find(a, kHour));  // an hour without a request
  sessions.Remove(b);
  EXPECT_FALSE(sessions.Find(b, 1));
  EXPECT_TRUE(sessions.Find(c, 1));
  sessions.RemoveKey("K2");
  EXPECT_FALSE(sessions.Find(c, 2));
}

TEST(ConsoleSessions, OneMoreThanTheLimitEndsTheLeastRecentlyUsed) {
  ConsoleSessions sessions(8 * kHour, kHour, 2);
  std::string a, b, c;
  sessions.Create("K", 0, &a);
  sessions.Create("K", 1, &b);
  ASSERT_TRUE(sessions.Find(a, 2));  // a is used again: b is now the oldest
  sessions.Create("K", 3, &c);
  EXPECT_EQ(sessions.size(), 2u);
  EXPECT_TRUE(sessions.Find(a, 4));
  EXPECT_FALSE(sessions.Find(b, 4));
  EXPECT_TRUE(sessions.Find(c, 4));
}

http::Request WithHeaders(http::Fields headers) {
  http::Request r;
  r.method = "POST";
  r.path = "/console/api/call";
  r.headers = std::move(headers);
  return r;
}

TEST(ConsoleCookies, ReadsTheNamedCookieAmongOthers) {
  EXPECT_EQ(CookieValue(WithHeaders({{"Cookie", "a=1; trainyard_console=abc; b=2"}}), kConsoleCookie), "abc");
  EXPECT_EQ(CookieValue(WithHeaders({{"cookie", "x=1"}, {"COOKIE", "trainyard_console=def"}}), kConsoleCookie), "def");
  EXPECT_EQ(CookieValue(WithHeaders({{"Cookie", "xtrainyard_console=abc"}}), kConsoleCookie), "");
  EXPECT_EQ(CookieValue(WithHeaders({}), kConsoleCookie), "");
}

TEST(ConsoleCrossSite, OnlyTheConsolesOwnOriginPasses) {
  EXPECT_EQ(CrossSiteReason(WithHeaders({{"Host", "127.0.0.1:8080"}})), "");  // a client that is not a browser
  EXPECT_EQ(CrossSiteReason(WithHeaders({{"Host", "127.0.0.1:8080"}, {"Origin", "http://127.0.0.1:8080"},
                                         {"Sec-Fetch-Site", "same-origin"}})),
            "");
  EXPECT_NE(CrossSiteReason(WithHeaders({{"Host", "127.0.0.1:8080"}, {"Origin", "http://127.0.0.1:9090"}})), "");
  EXPECT_NE(CrossSiteReason(WithHeaders({{"Host", "127.0.0.1:8080"}, {"Origin", "null"}})), "");
  EXPECT_NE(CrossSiteReason(WithHeaders({{"Host", "127.0.0.1:8080"}, {"Sec-Fetch-Site", "same-site"}})), "");
  EXPECT_NE(CrossSiteReason(WithHeaders({{"Host", "127.0.0.1:8080"}, {"Sec-Fetch-Site", "cross-site"}})), "");
  EXPECT_NE(CrossSiteReason(WithHeaders({{"Origin", "http://127.0.0.1:8080"}})), "");  // no Host to match
  http::Request tls = WithHeaders({{"Host", "h:443"}, {"Origin", "http://h:443"}});
  tls.secure_transport = true;
  EXPECT_NE(CrossSiteReason(tls), "");  // the scheme counts
}

TEST(ConsoleAssets, ServesRegularFilesOfKnownTypesByNameOnly) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("console-test-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir / "app" / "pages");
  std::ofstream(dir / "app" / "index.html") << "<!doctype html>";
  std::ofstream(dir / "app" / "pages" / "a.js") << "export {}";
  std::ofstream(dir / "app" / "notes.bin") << "?";
  std::ofstream(dir / "secret.txt") << "outside";
  fs::create_symlink(dir / "secret.txt", dir / "app" / "link.txt");
  ConsoleAssets assets;
  assets.Load(dir.string());
  ASSERT_NE(assets.Find("static/index.html"), nullptr);
  EXPECT_EQ(assets.Find("static/index.html")->content_type, "text/html; charset=utf-8");
  ASSERT_NE(assets.Find("static/pages/a.js"), nullptr);
  EXPECT_EQ(assets.Find("static/notes.bin"), nullptr);  // unknown type
  EXPECT_EQ(assets.Find("static/link.txt"), nullptr);   // a link out of app/
  EXPECT_EQ(assets.Find("static/../secret.txt"), nullptr);
  EXPECT_EQ(assets.Find("vendor/uplot.js"), nullptr);   // not installed here
  fs::remove_all(dir);
}

}  // namespace
}  // namespace ty::api
