// The embedded buckets as S3 sees them (objstore/bucket_store.h), on a real directory.
#include "objstore/bucket_store.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <thread>
#include <atomic>
#include <future>

#include "core/clock.h"
#include "objstore/bucket_sweeper.h"
#include "objstore/objstore.h"

namespace ty::objstore {
namespace {

namespace fs = std::filesystem;

// MD5 computed independently of the store (one-shot EVP_Digest).
std::string Md5Raw(std::string_view data) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(data.data(), data.size(), out, &len, EVP_md5(), nullptr);
  return std::string(reinterpret_cast<char*>(out), len);
}
std::string Hex(std::string_view bytes) {
  static const char* d = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out += d[c >> 4];
    out += d[c & 15];
  }
  return out;
}
std::string Md5Hex(std::string_view data) { return Hex(Md5Raw(data)); }
std::string Base64(std::string_view bytes) {
  std::string out(4 * ((bytes.size() + 2) / 3) + 1, '\0');
  int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                          reinterpret_cast<const unsigned char*>(bytes.data()), static_cast<int>(bytes.size()));
  out.resize(static_cast<size_t>(n));
  return out;
}

std::string ReadAll(ObjectReader& r) {
  std::string out;
  while (true) {
    auto n = r.ReadAt(static_cast<int64_t>(out.size()), 7, &out);
    EXPECT_TRUE(n.ok()) << n.status().message();
    if (!n.ok() || *n == 0) return out;
  }
}

// Every file name under `dir` (recursively), relative.
std::set<std::string> FilesUnder(const fs::path& dir) {
  std::set<std::string> out;
  for (auto& e : fs::recursive_directory_iterator(dir))
    if (!e.is_directory()) out.insert(fs::relative(e.path(), dir).string());
  return out;
}

class BucketStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() /
            ("ty-bucket-store-" + std::to_string(::getpid()) + "-" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    store_ = NewBucketStore(root_.string());
    ASSERT_TRUE(store_->CreateBucket("data").ok());
  }
  void TearDown() override {
    std::error_code ec;
    fs::permissions(root_, fs::perms::owner_all, fs::perm_options::add, ec);
    fs::remove_all(root_, ec);
  }
  ObjectMeta Put(const std::string& key, const std::string& data, ObjectAttributes a = {}) {
    auto m = store_->PutObject("data", key, data, a);
    EXPECT_TRUE(m.ok()) << key << ": " << m.status().message();
    return m.ok() ? *m : ObjectMeta{};
  }
  void WriteFile(const fs::path& p, const std::string& data) {
    fs::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary) << data;
  }
  fs::path root_;
  std::unique_ptr<BucketStore> store_;
};

TEST_F(BucketStoreTest, EtagIsTheMd5OfTheContent) {
  EXPECT_EQ(Put("empty", "").etag, "d41d8cd98f00b204e9800998ecf8427e");
  EXPECT_EQ(Put("abc", "abc").etag, "900150983cd24fb0d6963f7d28e17f72");
  auto head = store_->HeadObject("data", "abc");
  ASSERT_TRUE(head.ok());
  EXPECT_EQ(head->etag, "900150983cd24fb0d6963f7d28e17f72");
  EXPECT_EQ(head->size, 3);
}

TEST_F(BucketStoreTest, AttributesRoundTrip) {
  ObjectAttributes a;
  a.content_type = "text/csv";
  a.headers = {{"Content-Encoding", "gzip"}, {"Cache-Control", "no-cache"}};
  a.user_metadata = {{"zeta", "1"}, {"alpha", "two words"}};
  Put("dir/x.csv", "a,b\n", a);
  auto r = store_->OpenObject("data", "dir/x.csv");
  ASSERT_TRUE(r.ok());
  const ObjectMeta& m = (*r)->meta();
  EXPECT_EQ(m.attributes.content_type, "text/csv");
  EXPECT_EQ(m.attributes.headers, a.headers);
  EXPECT_EQ(m.attributes.user_metadata, a.user_metadata);  // in the order given
  EXPECT_EQ(ReadAll(**r), "a,b\n");
  std::string part;
  auto n = (*r)->ReadAt(2, 100, &part);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(part, "b\n");
}

// Without a Content-MD5 the ETag's MD5 is computed piece by piece as the body is written: over a
// body of several pieces (1 MiB each) and a partial one, it must still be the MD5 of the whole.
TEST_F(BucketStoreTest, EtagOfABodyLargerThanAWritePieceIsTheMd5OfTheWhole) {
  std::string body((3 << 20) + 5, '\0');
  for (size_t i = 0; i < body.size(); ++i) body[i] = static_cast<char>((i * 131 + i / 4096) & 0xff);
  EXPECT_EQ(Put("big", body).etag, Md5Hex(body));
  auto r = store_->OpenObject("data", "big");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ((*r)->meta().etag, Md5Hex(body));
  EXPECT_TRUE(ReadAll(**r) == body);
  auto checked = store_->PutObject("data", "big2", body, {}, Base64(Md5Raw(body)));
  ASSERT_TRUE(checked.ok()) << checked.status().message();
  EXPECT_EQ(checked->etag, Md5Hex(body));
}

// A Content-MD5 is checked before anything is written: a mismatch on a key in new folders leaves
// no folder behind either.
TEST_F(BucketStoreTest, ContentMd5MismatchCreatesNoFolder) {
  auto bad = store_->PutObject("data", "new/folders/k", "hello", {}, Base64(Md5Raw("other")));
  EXPECT_EQ(S3Code(bad.status()), "BadDigest");
  EXPECT_FALSE(fs::exists(root_ / "data" / "new"));
}

TEST_F(BucketStoreTest, ContentMd5MismatchWritesNothing) {
  auto bad = store_->PutObject("data", "k", "hello", {}, Base64(Md5Raw("other")));
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(S3Code(bad.status()), "BadDigest");
  auto malformed = store_->PutObject("data", "k", "hello", {}, std::string("not base64"));
  EXPECT_EQ(S3Code(malformed.status()), "InvalidDigest");
  EXPECT_EQ(S3Code(store_->HeadObject("data", "k").status()), "NoSuchKey");
  EXPECT_TRUE(FilesUnder(root_ / "data").empty());
  auto good = store_->PutObject("data", "k", "hello", {}, Base64(Md5Raw("hello")));
  ASSERT_TRUE(good.ok()) << good.status().message();
  EXPECT_EQ(good->etag, Md5Hex("hello"));
}

TEST_F(BucketStoreTest, BadKeysGetS3Codes) {
  for (std::string key : std::vector<std::string>{"../x", "a/../../x", "/abs", "a//b", "./a", std::string("nul\0x", 5), "dir/"}) {
    auto st = store_->PutObject("data", key, "x", {});
    EXPECT_EQ(S3Code(st.status()), "InvalidArgument") << key;
  }
  EXPECT_EQ(S3Code(store_->PutObject("data", std::string(1025, 'k'), "x", {}).status()), "KeyTooLongError");
  EXPECT_EQ(S3Code(store_->PutObject("data", "a/.ty-tmp-0123", "x", {}).status()), "InvalidArgument");
  EXPECT_EQ(S3Code(store_->PutObject("Bad_Bucket", "k", "x", {}).status()), "InvalidBucketName");
  EXPECT_EQ(S3Code(store_->CreateBucket("ab")), "InvalidBucketName");
  EXPECT_EQ(S3Code(store_->PutObject("nothere", "k", "x", {}).status()), "NoSuchBucket");
  EXPECT_EQ(S3Code(store_->HeadObject("data", "../data/k").status()), "InvalidArgument");
  EXPECT_TRUE(FilesUnder(root_).empty());
}

TEST_F(BucketStoreTest, SymlinkedFolderIsNotWrittenThrough) {
  fs::path outside = root_.parent_path() / (root_.filename().string() + "-outside");
  fs::create_directories(outside);
  fs::create_symlink(outside, root_ / "data" / "link");
  auto st = store_->PutObject("data", "link/x", "secret", {});
  EXPECT_EQ(S3Code(st.status()), "InvalidArgument") << st.status().message();
  EXPECT_TRUE(fs::is_empty(outside));
  // Nor read through, nor listed.
  WriteFile(outside / "y", "outside");
  EXPECT_EQ(S3Code(store_->HeadObject("data", "link/y").status()), "NoSuchKey");
  fs::create_symlink(outside / "y", root_ / "data" / "filelink");
  EXPECT_EQ(S3Code(store_->HeadObject("data", "filelink").status()), "NoSuchKey");
  auto page = store_->ListObjects("data", {});
  ASSERT_TRUE(page.ok());
  EXPECT_TRUE(page->objects.empty());
  // A key whose folder is an object is refused too.
  Put("file", "f");
  EXPECT_EQ(S3Code(store_->PutObject("data", "file/x", "x", {}).status()), "InvalidArgument");
  fs::remove_all(outside);
}

TEST_F(BucketStoreTest, PlainFileGetsItsMd5AndAFreshOneWhenChanged) {
  WriteFile(root_ / "data" / "job" / "out.txt", "written by a job");
  auto head = store_->HeadObject("data", "job/out.txt");
  ASSERT_TRUE(head.ok()) << head.status().message();
  EXPECT_EQ(head->etag, Md5Hex("written by a job"));
  EXPECT_EQ(head->attributes.content_type, "");
  // The job rewrites it: a different size, so the stored record no longer holds.
  Put("job/out.txt", "v1");
  WriteFile(root_ / "data" / "job" / "out.txt", "rewritten in place");
  head = store_->HeadObject("data", "job/out.txt");
  ASSERT_TRUE(head.ok());
  EXPECT_EQ(head->etag, Md5Hex("rewritten in place"));
  auto page = store_->ListObjects("data", {});
  ASSERT_TRUE(page.ok());
  ASSERT_EQ(page->objects.size(), 1u);
  EXPECT_EQ(page->objects[0].etag, Md5Hex("rewritten in place"));
}

TEST_F(BucketStoreTest, ReadOnlyPlainFileStillAnswers) {
  WriteFile(root_ / "data" / "ro", "read only");
  fs::permissions(root_ / "data" / "ro", fs::perms::owner_read);
  auto head = store_->HeadObject("data", "ro");
  ASSERT_TRUE(head.ok()) << head.status().message();
  EXPECT_EQ(head->etag, Md5Hex("read only"));
}

TEST_F(BucketStoreTest, ReaderKeepsItsVersionAcrossAnOverwrite) {
  Put("k", "first version");
  auto r = store_->OpenObject("data", "k");
  ASSERT_TRUE(r.ok());
  Put("k", "second, longer version");
  EXPECT_EQ(ReadAll(**r), "first version");
  EXPECT_EQ((*r)->meta().etag, Md5Hex("first version"));
  auto now = store_->OpenObject("data", "k");
  ASSERT_TRUE(now.ok());
  EXPECT_EQ(ReadAll(**now), "second, longer version");
}

TEST_F(BucketStoreTest, DeleteObject) {
  Put("a/b", "x");
  EXPECT_TRUE(store_->DeleteObject("data", "a/b").ok());
  EXPECT_TRUE(store_->DeleteObject("data", "a/b").ok());  // as S3: no such key is fine
  EXPECT_TRUE(store_->DeleteObject("data", "a").ok());    // a folder is not an object
  EXPECT_EQ(S3Code(store_->HeadObject("data", "a/b").status()), "NoSuchKey");
  EXPECT_EQ(S3Code(store_->DeleteObject("nothere", "k")), "NoSuchBucket");
  // The folder "a" that held a/b is empty now: an object may take its name.
  EXPECT_EQ(Put("a", "now an object").etag, Md5Hex("now an object"));
}

TEST_F(BucketStoreTest, Buckets) {
  EXPECT_EQ(S3Code(store_->CreateBucket("data")), "BucketAlreadyOwnedByYou");
  ASSERT_TRUE(store_->CreateBucket("another").ok());
  fs::create_directories(root_ / "by-hand");
  auto list = store_->ListBuckets();
  ASSERT_TRUE(list.ok());
  std::vector<std::string> names;
  for (auto& b : *list) {
    names.push_back(b.name);
    EXPECT_GT(b.created_ms, 0) << b.name;
  }
  EXPECT_EQ(names, (std::vector<std::string>{"another", "by-hand", "data"}));
  EXPECT_TRUE(store_->HeadBucket("data").ok());
  EXPECT_EQ(S3Code(store_->HeadBucket("nothere")), "NoSuchBucket");
}

TEST_F(BucketStoreTest, DeleteBucketRefusesUnlessEmpty) {
  Put("a/b/c", "x");
  EXPECT_EQ(S3Code(store_->DeleteBucket("data")), "BucketNotEmpty");
  ASSERT_TRUE(store_->DeleteObject("data", "a/b/c").ok());
  auto upload = store_->CreateMultipartUpload("data", "big", {});
  ASSERT_TRUE(upload.ok());
  EXPECT_EQ(S3Code(store_->DeleteBucket("data")), "BucketNotEmpty");
  EXPECT_TRUE(fs::exists(root_ / "data" / "a" / "b"));
  ASSERT_TRUE(store_->AbortMultipartUpload("data", "big", *upload).ok());
  // Only empty folders are left: they go with the bucket.
  ASSERT_TRUE(store_->DeleteBucket("data").ok());
  EXPECT_FALSE(fs::exists(root_ / "data"));
  EXPECT_EQ(S3Code(store_->DeleteBucket("data")), "NoSuchBucket");
}

// ListObjects against a brute-force model: every valid key sorted, those after start_after and
// under the prefix, rolled up at the delimiter, the first max_keys of them.
ListPage Model(const std::set<std::string>& keys, const ListQuery& q) {
  std::set<std::string> entries, prefixes;
  for (const std::string& k : keys) {
    if (k.compare(0, q.prefix.size(), q.prefix) != 0 || k <= q.start_after) continue;
    size_t at = q.delimiter.empty() ? std::string::npos : k.find(q.delimiter, q.prefix.size());
    if (at == std::string::npos) {
      entries.insert(k);
    } else if (std::string cp = k.substr(0, at + q.delimiter.size()); cp > q.start_after) {
      entries.insert(cp);
      prefixes.insert(cp);
    }
  }
  ListPage page;
  int n = 0;
  for (const std::string& e : entries) {
    if (n == std::min(q.max_keys, 1000)) {
      page.truncated = true;
      break;
    }
    if (prefixes.count(e)) page.common_prefixes.push_back(e);
    else page.objects.push_back(ObjectMeta{e});
    page.last = e;
    ++n;
  }
  return page;
}

TEST_F(BucketStoreTest, ListingMatchesAModelOfS3) {
  std::mt19937 rng(19);
  const std::vector<std::string> segments = {"a", "b", "ab", "a-b", "a.b", "z", "é", "a b", "0"};
  std::set<std::string> keys;
  while (keys.size() < 300) {
    std::string key;
    int depth = 1 + static_cast<int>(rng() % 4);
    for (int d = 0; d < depth; ++d) key += (d ? "/" : "") + segments[rng() % segments.size()];
    // A key cannot be both an object and a folder of objects here.
    bool clash = false;
    for (const std::string& k : keys)
      if (k.rfind(key + "/", 0) == 0 || key.rfind(k + "/", 0) == 0) clash = true;
    if (clash) continue;
    // Most are written as a job writes files (each Put pays two fsyncs): their ETags are computed.
    if (keys.size() % 10 == 0) Put(key, "x");
    else WriteFile(root_ / "data" / key, "x");
    keys.insert(key);
  }
  // Never listed: a temporary file, a symlink, a FIFO, an empty folder.
  WriteFile(root_ / "data" / "a" / ".ty-tmp-abc", "in flight");
  fs::create_symlink("/etc/passwd", root_ / "data" / "link");
  ASSERT_EQ(::mkfifo((root_ / "data" / "fifo").c_str(), 0600), 0);
  fs::create_directories(root_ / "data" / "empty" / "folder");

  std::vector<std::string> prefixes = {"", "a", "a/", "a/b", "ab/", "é", "z/z/", "nothing/", "a/.", "a//"};
  std::vector<std::string> delimiters = {"", "/", "b", "/a"};
  std::vector<int> sizes = {2, 7, 1000};
  int checked = 0;
  for (const std::string& prefix : prefixes)
    for (const std::string& delimiter : delimiters)
      for (int max_keys : sizes) {
        // Page through as a client does: start_after = the previous page's last entry.
        ListQuery q{prefix, delimiter, "", max_keys};
        for (int pages = 0; pages < 400; ++pages) {
          auto got = store_->ListObjects("data", q);
          ASSERT_TRUE(got.ok()) << got.status().message();
          ListPage want = Model(keys, q);
          std::vector<std::string> got_keys, want_keys;
          for (auto& o : got->objects) got_keys.push_back(o.key);
          for (auto& o : want.objects) want_keys.push_back(o.key);
          std::string where = "prefix '" + prefix + "' delimiter '" + delimiter + "' max " + std::to_string(max_keys) +
                              " after '" + q.start_after + "'";
          ASSERT_EQ(got_keys, want_keys) << where;
          ASSERT_EQ(got->common_prefixes, want.common_prefixes) << where;
          ASSERT_EQ(got->truncated, want.truncated) << where;
          ASSERT_EQ(got->last, want.last) << where;
          for (auto& o : got->objects) ASSERT_EQ(o.etag, Md5Hex("x"));
          ++checked;
          if (!got->truncated) break;
          q.start_after = got->last;
        }
      }
  EXPECT_GT(checked, 500);
  // UTF-8 byte order: "é" (0xc3 0xa9) sorts after every ASCII key.
  auto all = store_->ListObjects("data", ListQuery{"", "/", "", 1000});
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->last.substr(0, 2), "é") << all->last;
  // A start_after in the middle of a folder.
  ListQuery mid{"", "/", "a/b", 1000};
  auto got = store_->ListObjects("data", mid);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->common_prefixes, Model(keys, mid).common_prefixes);
  EXPECT_EQ(S3Code(store_->ListObjects("nothere", {}).status()), "NoSuchBucket");
  auto zero = store_->ListObjects("data", ListQuery{"", "", "", 0});
  ASSERT_TRUE(zero.ok());
  EXPECT_TRUE(zero->objects.empty() && zero->common_prefixes.empty() && !zero->truncated);
}

TEST_F(BucketStoreTest, DirectoryStoreListSkipsTemporaryFiles) {
  WriteFile(root_ / "data" / "p" / ".ty-tmp-0123456789", "in flight");
  Put("p/done", "x");
  auto dir = NewDirStore(root_.string());
  auto list = dir->List("data", "p/");
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 1u);
  EXPECT_EQ((*list)[0].key, "p/done");
}

class MultipartTest : public BucketStoreTest {
 protected:
  std::string Part(char c, size_t n) { return std::string(n, c); }
  std::string Begin(ObjectAttributes a = {}) {
    auto id = store_->CreateMultipartUpload("data", "big/object", a);
    EXPECT_TRUE(id.ok()) << id.status().message();
    EXPECT_GE(id.ok() ? id->size() : 0, 32u);
    return id.ok() ? *id : "";
  }
  std::string Upload(const std::string& id, int n, const std::string& data) {
    auto etag = store_->UploadPart("data", "big/object", id, n, data);
    EXPECT_TRUE(etag.ok()) << etag.status().message();
    return etag.ok() ? *etag : "";
  }
  // Nothing at the key, no temporary file in the bucket.
  void ExpectNothingVisible() {
    EXPECT_EQ(S3Code(store_->HeadObject("data", "big/object").status()), "NoSuchKey");
    if (fs::exists(root_ / "data")) EXPECT_TRUE(FilesUnder(root_ / "data").empty());
  }
};

TEST_F(MultipartTest, CompleteConcatenatesWithTheMultipartEtag) {
  ObjectAttributes a;
  a.content_type = "application/x-tar";
  a.user_metadata = {{"run", "7"}};
  std::string id = Begin(a);
  std::string p1 = Part('a', kMinPartBytes), p2 = Part('b', kMinPartBytes + 1), p3 = "tail";
  std::string e2 = Upload(id, 2, p2);
  std::string e1 = Upload(id, 1, "to be replaced");
  e1 = Upload(id, 1, p1);  // a part sent again replaces the earlier one
  std::string e3 = Upload(id, 3, p3);
  EXPECT_EQ(e1, Md5Hex(p1));
  auto parts = store_->ListParts("data", "big/object", id);
  ASSERT_TRUE(parts.ok());
  ASSERT_EQ(parts->size(), 3u);
  EXPECT_EQ((*parts)[0].part_number, 1);
  EXPECT_EQ((*parts)[0].size, static_cast<int64_t>(p1.size()));
  EXPECT_EQ((*parts)[2].etag, Md5Hex(p3));
  auto uploads = store_->ListMultipartUploads("data", {});
  ASSERT_TRUE(uploads.ok());
  ASSERT_EQ(uploads->uploads.size(), 1u);
  EXPECT_EQ(uploads->uploads[0].key, "big/object");
  EXPECT_EQ(uploads->uploads[0].upload_id, id);
  ExpectNothingVisible();

  auto done = store_->CompleteMultipartUpload("data", "big/object", id,
                                              {{1, "\"" + e1 + "\""}, {2, e2}, {3, "\"" + e3 + "\""}});
  ASSERT_TRUE(done.ok()) << done.status().message();
  std::string want = Md5Hex(Md5Raw(p1) + Md5Raw(p2) + Md5Raw(p3)) + "-3";
  EXPECT_EQ(done->etag, want);
  auto r = store_->OpenObject("data", "big/object");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ((*r)->meta().etag, want);
  EXPECT_EQ((*r)->meta().size, static_cast<int64_t>(p1.size() + p2.size() + p3.size()));
  EXPECT_EQ((*r)->meta().attributes.content_type, "application/x-tar");
  EXPECT_EQ((*r)->meta().attributes.user_metadata, a.user_metadata);
  std::string content;
  ASSERT_TRUE((*r)->ReadAt(0, p1.size() + p2.size() + p3.size() + 10, &content).ok());
  EXPECT_TRUE(content == p1 + p2 + p3);
  // The upload is gone.
  EXPECT_EQ(S3Code(store_->ListParts("data", "big/object", id).status()), "NoSuchUpload");
  EXPECT_TRUE(store_->ListMultipartUploads("data", {})->uploads.empty());
  EXPECT_TRUE(fs::is_empty(root_ / ".uploads"));
}

TEST_F(MultipartTest, EachFailureLeavesNothingVisible) {
  std::string id = Begin();
  std::string e1 = Upload(id, 1, Part('a', 100));
  std::string e2 = Upload(id, 2, Part('b', 100));
  auto code = [&](const std::vector<std::pair<int, std::string>>& parts) {
    return S3Code(store_->CompleteMultipartUpload("data", "big/object", id, parts).status());
  };
  EXPECT_EQ(code({{1, Md5Hex("wrong")}}), "InvalidPart");
  EXPECT_EQ(code({{3, e1}}), "InvalidPart");
  EXPECT_EQ(code({{2, e2}, {1, e1}}), "InvalidPartOrder");
  EXPECT_EQ(code({{1, e1}, {1, e1}}), "InvalidPartOrder");
  EXPECT_EQ(code({{1, e1}, {2, e2}}), "EntityTooSmall");  // part 1 is under 5 MiB
  EXPECT_EQ(code({}), "MalformedXML");
  ExpectNothingVisible();
  // The upload survives its failed completions.
  auto one = store_->CompleteMultipartUpload("data", "big/object", id, {{2, e2}});
  ASSERT_TRUE(one.ok()) << one.status().message();
  EXPECT_EQ(one->etag, Md5Hex(Md5Raw(Part('b', 100))) + "-1");
}

TEST_F(MultipartTest, UploadIdsAreNeverPaths) {
  std::string id = Begin();
  for (std::string bad : std::vector<std::string>{"../data", "..", "", std::string(32, 'g'), id + "/../" + id, id.substr(0, 31)}) {
    EXPECT_EQ(S3Code(store_->UploadPart("data", "big/object", bad, 1, "x").status()), "NoSuchUpload") << bad;
    EXPECT_EQ(S3Code(store_->AbortMultipartUpload("data", "big/object", bad)), "NoSuchUpload") << bad;
  }
  // An id names one bucket and key.
  EXPECT_EQ(S3Code(store_->UploadPart("data", "other", id, 1, "x").status()), "NoSuchUpload");
  EXPECT_EQ(S3Code(store_->UploadPart("data", "big/object", id, 0, "x").status()), "InvalidArgument");
  EXPECT_EQ(S3Code(store_->UploadPart("data", "big/object", id, 10001, "x").status()), "InvalidArgument");
  EXPECT_EQ(S3Code(store_->UploadPart("data", "big/object", id, 1, "x", Base64(Md5Raw("y"))).status()), "BadDigest");
}

TEST_F(MultipartTest, AbortRemovesTheUpload) {
  std::string id = Begin();
  Upload(id, 1, "x");
  ASSERT_TRUE(store_->AbortMultipartUpload("data", "big/object", id).ok());
  EXPECT_EQ(S3Code(store_->UploadPart("data", "big/object", id, 2, "y").status()), "NoSuchUpload");
  EXPECT_EQ(S3Code(store_->CompleteMultipartUpload("data", "big/object", id, {{1, Md5Hex("x")}}).status()),
            "NoSuchUpload");
  EXPECT_EQ(S3Code(store_->AbortMultipartUpload("data", "big/object", id)), "NoSuchUpload");
  ExpectNothingVisible();
  EXPECT_TRUE(fs::is_empty(root_ / ".uploads"));
}

TEST_F(BucketStoreTest, CopyObject) {
  ObjectAttributes a;
  a.content_type = "text/plain";
  a.user_metadata = {{"k", "v"}};
  Put("src", "copied content", a);
  auto copy = store_->CopyObject("data", "src", "data", "dst/copy", std::nullopt);
  ASSERT_TRUE(copy.ok()) << copy.status().message();
  EXPECT_EQ(copy->etag, Md5Hex("copied content"));
  auto r = store_->OpenObject("data", "dst/copy");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(ReadAll(**r), "copied content");
  EXPECT_EQ((*r)->meta().attributes.user_metadata, a.user_metadata);
  ObjectAttributes b;
  b.content_type = "application/json";
  ASSERT_TRUE(store_->CreateBucket("other").ok());
  copy = store_->CopyObject("data", "src", "other", "k", b);
  ASSERT_TRUE(copy.ok());
  EXPECT_EQ(store_->HeadObject("other", "k")->attributes.content_type, "application/json");
  EXPECT_TRUE(store_->HeadObject("other", "k")->attributes.user_metadata.empty());
  EXPECT_EQ(S3Code(store_->CopyObject("data", "src", "data", "src", std::nullopt).status()), "InvalidRequest");
  ASSERT_TRUE(store_->CopyObject("data", "src", "data", "src", b).ok());  // self-copy replacing metadata
  EXPECT_EQ(store_->HeadObject("data", "src")->attributes.content_type, "application/json");
  EXPECT_EQ(S3Code(store_->CopyObject("data", "missing", "data", "x", std::nullopt).status()), "NoSuchKey");
  EXPECT_EQ(S3Code(store_->HeadObject("data", "x").status()), "NoSuchKey");
}

TEST_F(MultipartTest, CopyOfAMultipartObjectGetsTheMd5OfItsContent) {
  std::string id = Begin();
  std::string e1 = Upload(id, 1, "one part");
  ASSERT_TRUE(store_->CompleteMultipartUpload("data", "big/object", id, {{1, e1}}).ok());
  auto copy = store_->CopyObject("data", "big/object", "data", "copy", std::nullopt);
  ASSERT_TRUE(copy.ok());
  EXPECT_EQ(copy->etag, Md5Hex("one part"));
}

TEST_F(BucketStoreTest, NoTemporaryFileAfterAFailedWrite) {
  Put("dir/inner", "x");
  // The key names a folder that holds objects: the rename fails after the data was written.
  auto st = store_->PutObject("data", "dir", "payload", {});
  EXPECT_EQ(S3Code(st.status()), "InvalidArgument") << st.status().message();
  EXPECT_EQ(FilesUnder(root_ / "data"), (std::set<std::string>{"dir/inner"}));
  auto copy = store_->CopyObject("data", "dir/inner", "data", "dir", std::nullopt);
  EXPECT_EQ(S3Code(copy.status()), "InvalidArgument");
  EXPECT_EQ(FilesUnder(root_ / "data"), (std::set<std::string>{"dir/inner"}));
}

// One store shared by threads, as by the HTTP workers: a reader always gets one whole version,
// and the ETag it is told is that version's MD5.
TEST_F(BucketStoreTest, ConcurrentWritersAndReadersSeeWholeVersions) {
  Put("shared", "seed");
  std::atomic<int> writers_left{2};
  std::atomic<int> bad{0}, reads{0};
  std::vector<std::thread> threads;
  for (int w = 0; w < 2; ++w)
    threads.emplace_back([&, w] {
      for (int i = 0; i < 10; ++i) {
        std::string data(1000 * (i + 1) + w, static_cast<char>('a' + w));
        if (!store_->PutObject("data", "shared", data, {}).ok()) ++bad;
      }
      --writers_left;
    });
  for (int r = 0; r < 2; ++r)
    threads.emplace_back([&] {
      while (writers_left > 0 || reads < 10) {
        auto obj = store_->OpenObject("data", "shared");
        if (!obj.ok()) {
          ++bad;
          continue;
        }
        std::string content;
        if (!(*obj)->ReadAt(0, 1 << 20, &content).ok() || Md5Hex(content) != (*obj)->meta().etag ||
            static_cast<int64_t>(content.size()) != (*obj)->meta().size)
          ++bad;
        ++reads;
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(bad, 0);
  EXPECT_GE(reads, 10);
  EXPECT_EQ(FilesUnder(root_ / "data"), (std::set<std::string>{"shared"}));
}

TEST_F(BucketStoreTest, MetadataLivesInOneXattr) {
  Put("k", "v");
  char buf[4096];
  ssize_t n = ::getxattr((root_ / "data" / "k").c_str(), "user.trainyard.s3", buf, sizeof buf);
  if (n < 0 && errno == ENOTSUP) GTEST_SKIP() << "no user xattrs on " << root_;
  ASSERT_GT(n, 0);
  EXPECT_NE(std::string(buf, static_cast<size_t>(n)).find(Md5Hex("v")), std::string::npos);
}

}  // namespace
}  // namespace ty::objstore

namespace ty::objstore {
namespace {

// Every page of ListMultipartUploads with `q` (markers followed as a client follows them), as
// "key id" for uploads and "prefix/" for common prefixes.
std::vector<std::string> AllPages(BucketStore& store, UploadQuery q, int* pages) {
  std::vector<std::string> out;
  *pages = 0;
  while (true) {
    auto page = store.ListMultipartUploads("data", q);
    EXPECT_TRUE(page.ok()) << page.status().message();
    if (!page.ok() || ++*pages > 100) return out;
    EXPECT_LE(static_cast<int>(page->uploads.size() + page->common_prefixes.size()), q.max_uploads);
    std::vector<std::string> items;
    for (const auto& u : page->uploads) items.push_back(u.key + " " + u.upload_id);
    for (const auto& p : page->common_prefixes) items.push_back(p);
    std::sort(items.begin(), items.end());
    out.insert(out.end(), items.begin(), items.end());
    if (!page->truncated) {
      EXPECT_TRUE(page->next_key_marker.empty());
      return out;
    }
    q.key_marker = page->next_key_marker;
    q.upload_id_marker = page->next_upload_id_marker;
  }
}

TEST_F(BucketStoreTest, ListMultipartUploadsPagesInKeyThenStartOrder) {
  // Three uploads of one key, started in order, and others around it.
  std::vector<std::pair<std::string, std::string>> made;  // (key, id) in the order S3 lists them
  for (const char* key : {"a/1", "b", "a/1", "c/d/e", "a/1", "a/2", "c/x", "d"}) {
    auto id = store_->CreateMultipartUpload("data", key, {});
    ASSERT_TRUE(id.ok()) << id.status().message();
    made.emplace_back(key, *id);
  }
  std::stable_sort(made.begin(), made.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
  std::vector<std::string> want;
  for (const auto& [key, id] : made) want.push_back(key + " " + id);
  // One key's uploads come in the order they were started, and their ids sort the same way.
  EXPECT_LT(made[0].second, made[1].second);
  EXPECT_LT(made[1].second, made[2].second);

  for (int max : {1, 2, 3, 7, 8, 1000}) {
    int pages = 0;
    UploadQuery q;
    q.max_uploads = max;
    EXPECT_EQ(AllPages(*store_, q, &pages), want) << "max " << max;
    EXPECT_EQ(pages, (static_cast<int>(want.size()) + max - 1) / max) << "max " << max;
  }
  // With a delimiter, a/ and c/ are one entry each, on whichever page they fall.
  for (int max : {1, 2, 4}) {
    int pages = 0;
    UploadQuery q;
    q.delimiter = "/";
    q.max_uploads = max;
    std::vector<std::string> got = AllPages(*store_, q, &pages);
    std::vector<std::string> rolled = {"a/", "b " + made[4].second, "c/", "d " + made[7].second};
    EXPECT_EQ(got, rolled) << "max " << max;
  }
  {
    int pages = 0;
    UploadQuery q;
    q.prefix = "c/";
    q.delimiter = "/";
    EXPECT_EQ(AllPages(*store_, q, &pages), (std::vector<std::string>{"c/d/", "c/x " + made[6].second}));
  }
  // A key-marker alone skips all of that key's uploads; with an upload-id-marker, only those up to it.
  UploadQuery q;
  q.key_marker = "a/1";
  auto page = store_->ListMultipartUploads("data", q);
  ASSERT_TRUE(page.ok());
  ASSERT_FALSE(page->uploads.empty());
  EXPECT_EQ(page->uploads[0].key, "a/2");
  q.upload_id_marker = made[0].second;
  page = store_->ListMultipartUploads("data", q);
  ASSERT_TRUE(page.ok());
  ASSERT_GE(page->uploads.size(), 2u);
  EXPECT_EQ(page->uploads[0].upload_id, made[1].second);
  EXPECT_EQ(page->uploads[1].upload_id, made[2].second);

  for (int bad : {0, -1, 1001}) {
    UploadQuery b;
    b.max_uploads = bad;
    EXPECT_EQ(S3Code(store_->ListMultipartUploads("data", b).status()), "InvalidArgument") << bad;
  }
  EXPECT_EQ(S3Code(store_->ListMultipartUploads("nope", {}).status()), "NoSuchBucket");
}

int64_t NowMs() { return SystemClock::instance().now_ms(); }

// Sets the modification time of `p` (not following a symlink) to `ms`.
void SetMtime(const fs::path& p, int64_t ms) {
  struct timespec times[2];
  times[0].tv_sec = times[1].tv_sec = ms / 1000;
  times[0].tv_nsec = times[1].tv_nsec = (ms % 1000) * 1000000;
  ASSERT_EQ(::utimensat(AT_FDCWD, p.c_str(), times, AT_SYMLINK_NOFOLLOW), 0) << p;
}

constexpr int64_t kHourMs = 3600 * 1000;

TEST_F(BucketStoreTest, SweepRemovesOnlyOldTemporaryFilesAndNeverFollowsSymlinks) {
  const int64_t now = NowMs();
  Put("keep/object", "data");
  SetMtime(root_ / "data/keep/object", now - 100 * kHourMs);  // old, but an object
  WriteFile(root_ / "data/.ty-tmp-0123", "interrupted");
  SetMtime(root_ / "data/.ty-tmp-0123", now - 25 * kHourMs);
  WriteFile(root_ / "data/deep/er/.ty-tmp-4567", "interrupted");
  SetMtime(root_ / "data/deep/er/.ty-tmp-4567", now - 25 * kHourMs);
  WriteFile(root_ / "data/.ty-tmp-fresh", "in progress");
  SetMtime(root_ / "data/.ty-tmp-fresh", now - 23 * kHourMs);
  ASSERT_TRUE(store_->CreateBucket("other").ok());
  WriteFile(root_ / "other/.ty-tmp-89ab", "interrupted");
  SetMtime(root_ / "other/.ty-tmp-89ab", now - 25 * kHourMs);
  // Outside the buckets, reached only through symlinks: a folder and a file.
  fs::path outside = root_.string() + "-outside";
  fs::remove_all(outside);
  WriteFile(outside / ".ty-tmp-outside", "not ours");
  SetMtime(outside / ".ty-tmp-outside", now - 25 * kHourMs);
  fs::create_directory_symlink(outside, root_ / "data/linked");
  fs::create_symlink(outside / ".ty-tmp-outside", root_ / "data/.ty-tmp-link");
  SetMtime(root_ / "data/.ty-tmp-link", now - 25 * kHourMs);

  SweepResult r = store_->Sweep(now - 24 * kHourMs, std::nullopt);
  EXPECT_TRUE(r.first_error.ok()) << r.first_error.message();
  EXPECT_EQ(r.temp_files, 3);
  EXPECT_EQ(r.uploads, 0);
  EXPECT_FALSE(fs::exists(root_ / "data/.ty-tmp-0123"));
  EXPECT_FALSE(fs::exists(root_ / "data/deep/er/.ty-tmp-4567"));
  EXPECT_FALSE(fs::exists(root_ / "other/.ty-tmp-89ab"));
  EXPECT_TRUE(fs::exists(root_ / "data/.ty-tmp-fresh"));
  EXPECT_TRUE(fs::exists(root_ / "data/keep/object"));
  EXPECT_TRUE(fs::is_symlink(root_ / "data/.ty-tmp-link"));
  EXPECT_TRUE(fs::exists(outside / ".ty-tmp-outside"));
  fs::remove_all(outside);
}

TEST_F(BucketStoreTest, SweepAbortsUploadsStartedBeforeTheCutoff) {
  auto old_id = store_->CreateMultipartUpload("data", "old", {});
  auto new_id = store_->CreateMultipartUpload("data", "new", {});
  ASSERT_TRUE(old_id.ok() && new_id.ok());
  ASSERT_TRUE(store_->UploadPart("data", "new", *new_id, 1, "part").ok());
  auto listed = store_->ListMultipartUploads("data", {});
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->uploads.size(), 2u);
  const int64_t old_started = listed->uploads[1].key == "old" ? listed->uploads[1].initiated_ms : -1;
  ASSERT_GT(old_started, 0);
  const int64_t new_started = listed->uploads[0].initiated_ms;
  // An interrupted part in the live upload; a folder whose start never wrote its record.
  fs::path live = root_ / ".uploads" / *new_id;
  WriteFile(live / ".ty-tmp-part", "half a part");
  SetMtime(live / ".ty-tmp-part", NowMs() - 25 * kHourMs);
  fs::path unrecorded = root_ / ".uploads" / std::string(32, 'a');
  fs::create_directory(unrecorded);
  SetMtime(unrecorded, NowMs() - 25 * kHourMs);

  // Uploads are never aborted without a cutoff, nor at one equal to their start.
  SweepResult r = store_->Sweep(NowMs() - 24 * kHourMs, std::nullopt);
  EXPECT_EQ(r.uploads, 0);
  EXPECT_EQ(r.temp_files, 2);
  EXPECT_FALSE(fs::exists(live / ".ty-tmp-part"));
  EXPECT_FALSE(fs::exists(unrecorded));
  r = store_->Sweep(0, std::min(old_started, new_started));
  EXPECT_EQ(r.uploads, 0);
  EXPECT_EQ(store_->ListMultipartUploads("data", {})->uploads.size(), 2u);

  r = store_->Sweep(0, std::max(old_started, new_started) + 1);
  EXPECT_TRUE(r.first_error.ok()) << r.first_error.message();
  EXPECT_EQ(r.uploads, 2);
  EXPECT_TRUE(store_->ListMultipartUploads("data", {})->uploads.empty());
  EXPECT_EQ(S3Code(store_->UploadPart("data", "new", *new_id, 2, "x").status()), "NoSuchUpload");
  EXPECT_TRUE(fs::is_empty(root_ / ".uploads"));
  EXPECT_TRUE(store_->DeleteBucket("data").ok());  // nothing in progress holds it any more
}

TEST_F(BucketStoreTest, SweeperRunsAtOnceThenHourlyByItsClock) {
  ManualClock clock(NowMs());
  std::vector<SweepResult> reports;
  SweepPolicy policy;  // 24 h for temporary files, 7 days for uploads, hourly
  BucketSweeper sweeper(*store_, clock, policy, [&](const SweepResult& r) { reports.push_back(r); });
  WriteFile(root_ / "data/.ty-tmp-a", "x");
  SetMtime(root_ / "data/.ty-tmp-a", clock.now_ms() - 25 * kHourMs);
  WriteFile(root_ / "data/.ty-tmp-b", "x");
  SetMtime(root_ / "data/.ty-tmp-b", clock.now_ms() - 23 * kHourMs);
  auto id = store_->CreateMultipartUpload("data", "k", {});
  ASSERT_TRUE(id.ok());

  ASSERT_TRUE(sweeper.SweepIfDue());  // the first call sweeps
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_EQ(reports[0].temp_files, 1);
  EXPECT_FALSE(fs::exists(root_ / "data/.ty-tmp-a"));
  EXPECT_TRUE(fs::exists(root_ / "data/.ty-tmp-b"));
  clock.advance_ms(kHourMs - 1);
  EXPECT_FALSE(sweeper.SweepIfDue());
  clock.advance_ms(1);  // an hour on: b is 24 h old, not older
  ASSERT_TRUE(sweeper.SweepIfDue());
  EXPECT_EQ(reports.back().temp_files, 0);
  EXPECT_TRUE(fs::exists(root_ / "data/.ty-tmp-b"));
  clock.advance_ms(kHourMs);
  ASSERT_TRUE(sweeper.SweepIfDue());
  EXPECT_EQ(reports.back().temp_files, 1);
  EXPECT_FALSE(fs::exists(root_ / "data/.ty-tmp-b"));
  EXPECT_EQ(reports.back().uploads, 0);
  clock.advance_ms(7 * 24 * kHourMs);  // the upload is now more than 7 days old
  ASSERT_TRUE(sweeper.SweepIfDue());
  EXPECT_EQ(reports.back().uploads, 1);
  EXPECT_TRUE(store_->ListMultipartUploads("data", {})->uploads.empty());
}

TEST_F(BucketStoreTest, SweeperWithUploadAgeZeroNeverAborts) {
  ManualClock clock(NowMs());
  SweepPolicy policy;
  policy.upload_age_ms = 0;
  SweepResult last;
  BucketSweeper sweeper(*store_, clock, policy, [&](const SweepResult& r) { last = r; });
  ASSERT_TRUE(store_->CreateMultipartUpload("data", "k", {}).ok());
  clock.advance_ms(365 * 24 * kHourMs);
  ASSERT_TRUE(sweeper.SweepIfDue());
  EXPECT_EQ(last.uploads, 0);
  EXPECT_EQ(store_->ListMultipartUploads("data", {})->uploads.size(), 1u);
}

TEST_F(BucketStoreTest, SweeperThreadSweepsAtStartAndStopsWithoutWaitingForTheHour) {
  ManualClock clock(NowMs());
  WriteFile(root_ / "data/.ty-tmp-a", "x");
  SetMtime(root_ / "data/.ty-tmp-a", clock.now_ms() - 25 * kHourMs);
  std::promise<SweepResult> first;
  std::atomic<int> sweeps{0};
  BucketSweeper sweeper(*store_, clock, SweepPolicy{}, [&](const SweepResult& r) {
    if (sweeps.fetch_add(1) == 0) first.set_value(r);
  });
  sweeper.Start();
  EXPECT_EQ(first.get_future().get().temp_files, 1);  // waits for the start's sweep, not for a timer
  sweeper.Stop();  // the thread is waiting for the next hour; Stop ends the wait
  EXPECT_EQ(sweeps.load(), 1);
  EXPECT_FALSE(fs::exists(root_ / "data/.ty-tmp-a"));
}

// ---- Space limits (SpaceLimits; docs/object-store.md, "Space") ----

constexpr int64_t kMiB = 1 << 20;

// A store on a small file system: its free space is `capacity` less what the bucket root holds
// (every file, parts and temporary files included), as statvfs would say.
class BucketSpaceTest : public BucketStoreTest {
 protected:
  void Open(SpaceLimits limits, int64_t capacity) {
    store_ = NewBucketStore(root_.string(), limits, [this, capacity] { return capacity - BytesUnder(root_); });
  }
  static int64_t BytesUnder(const fs::path& dir) {
    int64_t n = 0;
    for (auto& e : fs::recursive_directory_iterator(dir))
      if (e.is_regular_file()) n += static_cast<int64_t>(e.file_size());
    return n;
  }
  std::string Upload(const std::string& key, const std::string& initiator) {
    auto id = store_->CreateMultipartUpload("data", key, {}, initiator);
    EXPECT_TRUE(id.ok()) << id.status().message();
    return id.ok() ? *id : "";
  }
  StatusOr<std::string> Part(const std::string& key, const std::string& id, int number, int64_t bytes) {
    return store_->UploadPart("data", key, id, number, std::string(static_cast<size_t>(bytes), 'p'));
  }
};

TEST_F(BucketSpaceTest, PartsAndObjectsAreRefusedBeforeTheyTakeTheDiskUnderTheReserve) {
  // reserve 64 MiB; the file system holds 64 + 20 MiB: 20 MiB for the buckets, less what is there.
  Open({64 * kMiB, 0}, 84 * kMiB - BytesUnder(root_));
  const std::string id = Upload("big", "arn:aws:iam::000000000000:user/alice");
  ASSERT_TRUE(Part("big", id, 1, 8 * kMiB).ok());
  ASSERT_TRUE(Part("big", id, 2, 8 * kMiB).ok());  // 4 MiB left above the reserve
  auto third = Part("big", id, 3, 8 * kMiB);
  ASSERT_FALSE(third.ok());
  EXPECT_EQ(S3Code(third.status()), "InsufficientStorage");
  EXPECT_NE(third.status().message().find("reserve of 64 MiB ([server] data_dir_reserve_mib"), std::string::npos)
      << third.status().message();
  auto parts = store_->ListParts("data", "big", id);
  ASSERT_TRUE(parts.ok());
  EXPECT_EQ(parts->size(), 2u);  // the refused part left nothing behind
  EXPECT_EQ(S3Code(store_->PutObject("data", "obj", std::string(5 * kMiB, 'o'), {}).status()), "InsufficientStorage");
  EXPECT_TRUE(store_->PutObject("data", "small", std::string(kMiB, 's'), {}).ok());
  // Completing writes the object before the parts go: 16 MiB more for a moment, which is not there.
  auto done = store_->CompleteMultipartUpload("data", "big", id, {{1, Md5Hex(std::string(8 * kMiB, 'p'))},
                                                                  {2, Md5Hex(std::string(8 * kMiB, 'p'))}});
  EXPECT_EQ(S3Code(done.status()), "InsufficientStorage");
  EXPECT_FALSE(store_->HeadObject("data", "big").ok());
  // Aborting gives the space back.
  ASSERT_TRUE(store_->AbortMultipartUpload("data", "big", id).ok());
  EXPECT_TRUE(store_->PutObject("data", "obj", std::string(16 * kMiB, 'o'), {}).ok());
}

TEST_F(BucketSpaceTest, AnInitiatorsIncompleteUploadsAreHeldToItsQuota) {
  const std::string alice = "arn:aws:iam::000000000000:user/alice", bob = "arn:aws:iam::000000000000:user/bob";
  Open({0, 3 * kMiB}, -1);  // quota 3 MiB; no reserve
  const std::string a = Upload("a", alice), b = Upload("b", alice), c = Upload("c", bob);
  // alice: a holds 1 + 1 MiB
  ASSERT_TRUE(Part("a", a, 1, kMiB).ok());
  ASSERT_TRUE(Part("a", a, 2, kMiB).ok());
  ASSERT_TRUE(Part("a", a, 2, kMiB).ok());  // sent again: replaces, 2 MiB still
  ASSERT_TRUE(Part("b", b, 1, kMiB).ok());  // 3 MiB: at the quota
  auto over = Part("b", b, 2, 1);
  ASSERT_FALSE(over.ok());
  EXPECT_EQ(S3Code(over.status()), "QuotaExceeded");
  EXPECT_NE(over.status().message().find(alice + " hold 3145728 bytes"), std::string::npos) << over.status().message();
  EXPECT_NE(over.status().message().find("quota of 3145728 bytes ([s3] max_incomplete_upload_bytes_per_user)"),
            std::string::npos) << over.status().message();
  EXPECT_TRUE(Part("c", c, 1, 3 * kMiB).ok());  // bob's quota is his own
  // The store opened again on the same buckets (a restart) counts what the uploads hold.
  Open({0, 3 * kMiB}, -1);
  EXPECT_EQ(S3Code(Part("b", b, 2, 1).status()), "QuotaExceeded");
  EXPECT_EQ(S3Code(Part("c", c, 2, 1).status()), "QuotaExceeded");
  // Aborting or completing an upload gives its bytes back.
  ASSERT_TRUE(store_->AbortMultipartUpload("data", "a", a).ok());
  ASSERT_TRUE(Part("b", b, 2, 2 * kMiB).ok());
  ASSERT_TRUE(store_->CompleteMultipartUpload("data", "c", c, {{1, Md5Hex(std::string(3 * kMiB, 'p'))}}).ok());
  const std::string d = Upload("d", bob);
  EXPECT_TRUE(Part("d", d, 1, 3 * kMiB).ok());
  auto uploads = store_->ListMultipartUploads("data", {});
  ASSERT_TRUE(uploads.ok());
  ASSERT_EQ(uploads->uploads.size(), 2u);  // b and d, in key order
  EXPECT_EQ(uploads->uploads[0].initiator, alice);
  EXPECT_EQ(uploads->uploads[1].initiator, bob);
}

}  // namespace
}  // namespace ty::objstore
