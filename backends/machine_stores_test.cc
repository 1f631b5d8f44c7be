#include "backends/machine_stores.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace sekka {
namespace {

namespace fs = std::filesystem;

struct TempFile {
  TempFile() {
    fs::create_directories(dir);
    fs::remove(path);
    fs::remove(path + ".adopted");
  }
  ~TempFile() { fs::remove_all(dir); }
  void Write(const std::vector<MachineRecord>& records) const {
    std::ofstream(path) << FormatMachineRecords(records);
  }
  // One per process: the suite's stages run this test side by side.
  const std::string dir =
      fs::temp_directory_path() / ("sekka_machine_stores_test_" + std::to_string(::getpid()));
  const std::string path = dir + "/machines";
};

TEST(FileMachineStoreTest, SavesAtTheVersionLoadedAndKeepsOtherNamespaces) {
  TempFile f;
  auto store = NewFileMachineStore(f.path);
  Result<MachineSnapshot> a = store->Load("a");
  ASSERT_TRUE(a.ok());
  EXPECT_TRUE(a->records.empty());
  ASSERT_TRUE(*store->Save("a", {{"a", 0, "i", false, 5, "", 60'000}}, a->version));
  EXPECT_FALSE(*store->Save("a", {}, a->version));  // saved since: load again
  Result<MachineSnapshot> b = store->Load("b");
  ASSERT_TRUE(*store->Save("b", {{"b", 3, "j", true, 7, "", 60'000}}, b->version));
  Result<std::vector<MachineRecord>> file = ReadMachineFile(f.path);
  ASSERT_TRUE(file.ok());
  EXPECT_EQ(file->size(), 2u);
  const std::vector<MachineRecord> want = {{"a", 0, "i", false, 5, "", 60'000}};
  EXPECT_EQ(NewFileMachineStore(f.path)->Load("a")->records, want);  // what a restart reads
}

// Issue 40: a server of a cluster that answered /machines alone kept them in its data dir; the
// cluster's store takes them over at its start, and its own holders win where both hold an id.
TEST(AdoptMachineFileTest, MergesIntoTheClustersRecordsOnceAndRenamesTheFile) {
  TempFile f;
  f.Write({{"ns", 0, "file-holder", false, 900, "", 60'000},
           {"ns", 1, "kept", true, 100, "", 60'000},
           {"other", 0, "x", false, 50, "", 60'000}});
  auto cluster = NewMemoryMachineStore();
  ASSERT_TRUE(*cluster->Save("ns", {{"ns", 0, "cluster-holder", false, 500, "", 60'000}}, "0"));
  ASSERT_TRUE(AdoptMachineFile(f.path, *cluster).ok());
  EXPECT_FALSE(fs::exists(f.path));
  EXPECT_TRUE(fs::exists(f.path + ".adopted"));
  std::vector<MachineRecord> want = {{"ns", 0, "cluster-holder", false, 900, "file-holder", 60'000},
                                     {"ns", 1, "kept", true, 100, "", 60'000}};
  EXPECT_EQ(cluster->Load("ns")->records, want);
  EXPECT_EQ(cluster->Load("other")->records.size(), 1u);
  ASSERT_TRUE(AdoptMachineFile(f.path, *cluster).ok());  // no file: nothing to do
  EXPECT_EQ(cluster->Load("ns")->records, want);
}

// Review of issue 40: an id the cluster had given back but the file's holder still used stayed
// free, and went to the next instance while the holder issued with it.
TEST(AdoptMachineFileTest, AnIdTheClusterGaveBackGoesToTheFilesHolder) {
  TempFile f;
  f.Write({{"ns", 2, "x", false, 900, "", 60'000}});
  auto cluster = NewMemoryMachineStore();
  ASSERT_TRUE(*cluster->Save("ns", {{"ns", 2, "", false, 1'000, "", 60'000}}, "0"));
  ASSERT_TRUE(AdoptMachineFile(f.path, *cluster).ok());
  const std::vector<MachineRecord> want = {{"ns", 2, "x", false, 1'000, "", 60'000}};
  EXPECT_EQ(cluster->Load("ns")->records, want);
}

// A store that cannot be read when the server starts fails the machine calls until it can, then
// adopts the file once.
TEST(AdoptMachineFileTest, AStoreDownAtStartAdoptsAtItsFirstLoadThatWorks) {
  TempFile f;
  f.Write({{"ns", 0, "x", false, 900, "", 60'000}});
  struct Down final : MachineStore {
    Result<MachineSnapshot> Load(std::string_view ns) override {
      if (down) return Unavailable("coordinator down");
      return inner->Load(ns);
    }
    Result<bool> Save(std::string_view ns, const std::vector<MachineRecord>& records,
                      const std::string& version) override {
      return inner->Save(ns, records, version);
    }
    bool down = true;
    std::unique_ptr<MachineStore> inner = NewMemoryMachineStore();
  };
  auto down = std::make_unique<Down>();
  Down& raw = *down;
  auto store = WithAdoptedFile(std::move(down), f.path);
  Result<MachineSnapshot> first = store->Load("ns");
  ASSERT_FALSE(first.ok());
  EXPECT_NE(first.error().message.find("not added yet"), std::string::npos);
  EXPECT_TRUE(fs::exists(f.path));
  raw.down = false;
  EXPECT_EQ(store->Load("ns")->records.size(), 1u);
  EXPECT_TRUE(fs::exists(f.path + ".adopted"));
}

TEST(AdoptMachineFileTest, ACorruptFileIsRefusedNamingIt) {
  TempFile f;
  std::ofstream(f.path) << "not sekka's\n";
  auto cluster = NewMemoryMachineStore();
  Status s = AdoptMachineFile(f.path, *cluster);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find(f.path), std::string::npos);
  EXPECT_TRUE(fs::exists(f.path));
}

}  // namespace
}  // namespace sekka
