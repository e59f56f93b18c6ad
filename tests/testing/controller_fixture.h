// A GoogleTest fixture for the controller's unit tests: a Controller over in-memory ports
// (fakes.h) with a manual clock and a scratch data directory, stepped by the test. Open() again
// is a restart: the old controller is dropped as a killed server would be, without a last turn,
// and the new one loads what the old one committed.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>

#include "control/controller.h"
#include "core/config.h"
#include "testing/fakes.h"

namespace ty::testing {

class ControllerFixture : public ::testing::Test {
 protected:
  // `name` makes the scratch directory's name (ty-<name>-<pid>) distinct per test binary; the
  // clock starts at `start`.
  explicit ControllerFixture(std::string name, EpochMs start = 1'800'000'000'000)
      : name_(std::move(name)), clock_(start) {}

  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("ty-" + name_ + "-" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    config_ = DefaultConfig();
    config_.data_dir = dir_.string();
    config_.sandbox = "none";
    Open();
  }
  void TearDown() override {
    c_.reset();
    std::filesystem::remove_all(dir_);
  }
  void Open() {
    c_.reset();
    auto executor = std::make_unique<FakeExecutor>();
    exec_ = executor.get();
    if (logs_in_data_dir_) exec_->SetLogDir(dir_.string());
    control::Ports ports{std::make_unique<MemStore>(data_), std::make_unique<MemEventLog>(data_), std::move(executor)};
    auto c = control::Controller::Open(config_, clock_, std::move(ports));
    ASSERT_TRUE(c.ok()) << c.status().message();
    c_ = std::move(c).value();
  }

  const std::string name_;
  // When set before SetUp, the fake executor's attempts have log files under the data directory
  // (FakeExecutor::SetLogDir), which the controller reads for MetricDefinitions.
  bool logs_in_data_dir_ = false;
  std::filesystem::path dir_;
  Config config_;
  ManualClock clock_;
  std::shared_ptr<MemData> data_ = std::make_shared<MemData>();
  FakeExecutor* exec_ = nullptr;
  std::unique_ptr<control::Controller> c_;
};

}  // namespace ty::testing
