// The baseline store: bounded (least recently used out), saved and read back exactly, and any
// file that is not exactly what it writes refused as a whole with file:line and the reason.

#include "agent/analytics/detection/baseline_store.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>

#include "plugin/ring/ncclscope_ring.h"
#include "tests/support/temp_dir.h"

namespace ncclscope::analytics::detection {
namespace {

constexpr std::int64_t kNow = 1'800'000'000;

BaselineKey Key(const std::string& name, int rank, std::uint8_t size = 8) {
  BaselineKey k;
  k.comm_name = name;
  k.nranks = 8;
  k.nnodes = 2;
  k.rank = rank;
  k.func = NCCLSCOPE_FUNC_ALL_REDUCE;
  k.algo = NCCLSCOPE_ALGO_RING;
  k.proto = NCCLSCOPE_PROTO_SIMPLE;
  k.size = size;
  return k;
}

void Write(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

TEST(BaselineStoreTest, SavedEntriesReadBackExactlyMostRecentFirst) {
  testing::TempDir dir;
  const std::string path = dir.path() + "/b";
  BaselineStore store(16);
  for (int r = 0; r < 3; ++r) {
    BaselineEntry& e = store.Get(Key(r == 1 ? "" : "DP group 0 %-x", r));
    e.p99_s = 0.001 * (r + 1) + 1e-12;
    e.windows = 10 + static_cast<std::uint32_t>(r);
    e.anomalous = static_cast<std::uint32_t>(r);
    e.last_seen_s = kNow - r;
  }
  std::string error;
  ASSERT_TRUE(store.Save(path, &error)) << error;
  BaselineStore back(16);
  ASSERT_EQ(back.Load(path, kNow, &error), BaselineStore::LoadStatus::kLoaded) << error;
  ASSERT_EQ(back.size(), 3u);
  for (int r = 0; r < 3; ++r) {
    const BaselineEntry* e = back.Find(Key(r == 1 ? "" : "DP group 0 %-x", r));
    ASSERT_NE(e, nullptr) << r;
    EXPECT_EQ(e->p99_s, 0.001 * (r + 1) + 1e-12);
    EXPECT_EQ(e->windows, 10u + static_cast<std::uint32_t>(r));
    EXPECT_EQ(e->anomalous, static_cast<std::uint32_t>(r));
    EXPECT_EQ(e->last_seen_s, kNow - r);
  }
  EXPECT_EQ(back.Load(dir.path() + "/none", kNow, &error), BaselineStore::LoadStatus::kMissing);
}

TEST(BaselineStoreTest, BoundedLeastRecentlyUsedFirstAndOldEntriesForgotten) {
  BaselineStore store(2);
  store.Get(Key("a", 0)).p99_s = 1;
  store.Get(Key("a", 1)).p99_s = 1;
  ASSERT_NE(store.Find(Key("a", 0)), nullptr);  // used: rank 1 is now the least recent
  store.Get(Key("a", 2)).p99_s = 1;
  EXPECT_EQ(store.size(), 2u);
  EXPECT_EQ(store.evictions(), 1u);
  EXPECT_EQ(store.Find(Key("a", 1)), nullptr);
  EXPECT_NE(store.Find(Key("a", 0)), nullptr);

  testing::TempDir dir;
  const std::string path = dir.path() + "/b";
  BaselineStore old(4);
  BaselineEntry& stale = old.Get(Key("old", 0));
  stale = {0.5, 3, 0, kNow - BaselineStore::kForgetAfterS - 1};
  BaselineEntry& fresh = old.Get(Key("new", 0));
  fresh = {0.5, 3, 0, kNow};
  std::string error;
  ASSERT_TRUE(old.Save(path, &error));
  BaselineStore back(4);
  ASSERT_EQ(back.Load(path, kNow, &error), BaselineStore::LoadStatus::kLoaded);
  EXPECT_EQ(back.size(), 1u);
  EXPECT_NE(back.Find(Key("new", 0)), nullptr);
}

TEST(BaselineStoreTest, NamesAreEscapedOneWay) {
  for (const std::string name : {"", "-", "SIM world", "a%b", "tp:0/dp.1+x_y", "\xe5\x9b\xbd"}) {
    std::string back;
    ASSERT_TRUE(BaselineStore::DecodeName(BaselineStore::EncodeName(name), &back)) << name;
    EXPECT_EQ(back, name);
    EXPECT_EQ(BaselineStore::EncodeName(name).find(' '), std::string::npos);
  }
  std::string out;
  EXPECT_FALSE(BaselineStore::DecodeName("%41", &out)) << "'A' spelled escaped: not ours";
  EXPECT_FALSE(BaselineStore::DecodeName("%4", &out));
  EXPECT_FALSE(BaselineStore::DecodeName("a b", &out));
  EXPECT_FALSE(BaselineStore::DecodeName("%00", &out));
  EXPECT_FALSE(BaselineStore::DecodeName("", &out));
}

TEST(BaselineStoreTest, AnythingButItsOwnFileIsRefusedWithFileLineAndReason) {
  testing::TempDir dir;
  const std::string path = dir.path() + "/b";
  const std::string header = "# ncclscope latency baselines v1\n";
  const std::string good = "x 8 2 3 AllReduce RING SIMPLE 64MiB-256MiB 0.002 5 0 1800000000\n";
  struct Case {
    std::string text;
    std::string why;
  };
  const Case cases[] = {
      {"", "1: empty file"},
      {"# ncclscope latency baselines v2\n# end 0\n", "1: not a ncclscope baselines v1 file"},
      {header + good, "no end line"},
      {header + good + "# end 1", "3: last line has no newline"},
      {header + good + "# end 2\n", "3: end line does not match the 1 entries"},
      {header + good + "# end 1\nmore\n", "4: text after the end line"},
      {header + "x 8 2 3 AllReduce RING SIMPLE 64MiB-256MiB 0.002 5 0\n# end 1\n",
       "2: expected 12 fields"},
      {header + "x 8 2 9 AllReduce RING SIMPLE 64MiB-256MiB 0.002 5 0 1\n# end 1\n",
       "2: bad nranks, nnodes or rank"},
      {header + "x 8 2 3 AllReduce RING SIMPLE 3MiB 0.002 5 0 1\n# end 1\n",
       "2: unknown function, algorithm, protocol or size"},
      {header + "x 8 2 3 AllReduce RING SIMPLE 64MiB-256MiB nan 5 0 1\n# end 1\n", "2: bad p99"},
      {header + "x 8 2 3 AllReduce RING SIMPLE 64MiB-256MiB -1 5 0 1\n# end 1\n", "2: bad p99"},
      {header + "x 8 2 3 AllReduce RING SIMPLE 64MiB-256MiB 0.002 0 0 1\n# end 1\n",
       "2: bad windows"},
      {header + "a%4 8 2 3 AllReduce RING SIMPLE 64MiB-256MiB 0.002 5 0 1\n# end 1\n",
       "2: bad communicator name"},
      {header + good + good + "# end 2\n", "duplicate key x"},
  };
  for (const Case& c : cases) {
    Write(path, c.text);
    BaselineStore store(16);
    store.Get(Key("in memory before", 0));
    std::string error;
    EXPECT_EQ(store.Load(path, kNow, &error), BaselineStore::LoadStatus::kCorrupt) << c.text;
    EXPECT_NE(error.find(path + ":"), std::string::npos) << error;
    EXPECT_NE(error.find(c.why), std::string::npos) << error << " (wanted " << c.why << ")";
    EXPECT_EQ(store.size(), 0u) << "starts fresh";
  }
  // Larger than max_keys lines could be, and unreadable (a directory).
  Write(path, header + std::string(3 * BaselineStore::kMaxLineBytes + 8192, 'x'));
  BaselineStore small(2);
  std::string error;
  EXPECT_EQ(small.Load(path, kNow, &error), BaselineStore::LoadStatus::kTooLarge);
  EXPECT_NE(error.find("larger than"), std::string::npos) << error;
  ::mkdir((dir.path() + "/d").c_str(), 0755);
  EXPECT_EQ(small.Load(dir.path() + "/d", kNow, &error), BaselineStore::LoadStatus::kUnreadable);
  // A save into a directory that is gone fails with the reason, and leaves nothing behind.
  EXPECT_FALSE(small.Save(dir.path() + "/gone/b", &error));
  EXPECT_NE(error.find("gone/b.tmp"), std::string::npos) << error;
}

}  // namespace
}  // namespace ncclscope::analytics::detection
