#include "bench/load/load_support.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"

namespace parity::load {

void Recorder::Sample(const std::string& call, double ms) {
  const absl::Time now = absl::Now();
  absl::MutexLock lock(&mu_);
  samples_[call].emplace_back(absl::ToDoubleSeconds(now - origin_), ms);
}

void Recorder::Error(const std::string& call, const std::string& code, const std::string& message) {
  const absl::Time now = absl::Now();
  absl::MutexLock lock(&mu_);
  const double at = absl::ToDoubleSeconds(now - origin_);
  ErrorSummary& e = errors_[call + " " + code];
  if (e.count++ == 0) {
    e.first_s = at;
    e.example = message.substr(0, 160);
  }
  e.last_s = at;
  error_times_.push_back(at);
}

void Recorder::Count(const std::string& what, int64_t n) {
  absl::MutexLock lock(&mu_);
  counts_[what] += n;
}

std::vector<double> Recorder::Samples(const std::string& call, double from_s) const {
  absl::MutexLock lock(&mu_);
  std::vector<double> ms;
  auto it = samples_.find(call);
  if (it == samples_.end()) return ms;
  for (const auto& [at, latency] : it->second) {
    if (at >= from_s) ms.push_back(latency);
  }
  return ms;
}

int64_t Recorder::CountOf(const std::string& what) const {
  absl::MutexLock lock(&mu_);
  auto it = counts_.find(what);
  return it == counts_.end() ? 0 : it->second;
}

std::map<std::string, Recorder::ErrorSummary> Recorder::Errors() const {
  absl::MutexLock lock(&mu_);
  return errors_;
}

std::vector<double> Recorder::ErrorTimes() const {
  absl::MutexLock lock(&mu_);
  return error_times_;
}

std::map<std::string, int64_t> Recorder::Counts() const {
  absl::MutexLock lock(&mu_);
  return counts_;
}

double Percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const size_t rank = static_cast<size_t>(p * static_cast<double>(values.size()));
  return values[std::min(values.size() - 1, rank)];
}

TimerQueue::TimerQueue() : thread_([this] { Run(); }) {}

TimerQueue::~TimerQueue() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  thread_.join();
}

void TimerQueue::At(absl::Time when, std::function<void()> callback) {
  absl::MutexLock lock(&mu_);
  queue_.emplace(when, std::move(callback));
}

double TimerQueue::LatenessP99Ms() const {
  absl::MutexLock lock(&mu_);
  return Percentile(lateness_ms_, 0.99);
}

void TimerQueue::Run() {
  absl::MutexLock lock(&mu_);
  while (!stopping_) {
    const absl::Time now = absl::Now();
    if (queue_.empty() || queue_.begin()->first > now) {
      // Woken by a new earlier timer too: At() changes queue_, which re-evaluates the condition.
      const absl::Time next = queue_.empty() ? now + absl::Milliseconds(50) : queue_.begin()->first;
      const absl::Time earliest_before = next;
      auto changed = [this, earliest_before]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
        return stopping_ || (!queue_.empty() && queue_.begin()->first < earliest_before);
      };
      mu_.AwaitWithDeadline(absl::Condition(&changed),
                            std::min(next, now + absl::Milliseconds(50)));
      continue;
    }
    auto node = queue_.extract(queue_.begin());
    lateness_ms_.push_back(absl::ToDoubleMilliseconds(now - node.key()));
    mu_.Unlock();
    node.mapped()();
    mu_.Lock();
  }
}

namespace {

// A whole /proc file, or "" when the process is gone (read(2), not iostreams: a process exiting
// mid-read makes libstdc++'s filebuf throw).
std::string ReadProcFile(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "";
  std::string text;
  char buffer[4096];
  for (;;) {
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n <= 0) break;
    text.append(buffer, static_cast<size_t>(n));
  }
  ::close(fd);
  return text;
}

// Fields 14 and 15 of /proc/PID/stat (utime, stime, in clock ticks); the command name may hold
// spaces, so the fields are counted from its closing parenthesis.
bool StatOf(pid_t pid, double& cpu_s, pid_t& parent) {
  const std::string text = ReadProcFile("/proc/" + std::to_string(pid) + "/stat");
  const size_t close = text.rfind(')');
  if (close == std::string::npos) return false;
  std::vector<std::string> fields = absl::StrSplit(text.substr(close + 2), ' ');
  if (fields.size() < 13 || fields[0] == "Z") return false;  // a zombie is dead
  // After ")": state(3) ppid(4) … utime(14) stime(15); index = field number - 3.
  double utime = 0, stime = 0;
  int ppid = 0;
  if (!absl::SimpleAtoi(fields[1], &ppid) || !absl::SimpleAtod(fields[11], &utime) ||
      !absl::SimpleAtod(fields[12], &stime)) {
    return false;
  }
  parent = ppid;
  cpu_s = (utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
  return true;
}

double StatusKiB(pid_t pid, const std::string& key) {
  const std::string text = ReadProcFile("/proc/" + std::to_string(pid) + "/status");
  const size_t at = text.find("\n" + key);
  if (at == std::string::npos) return 0;
  return std::strtod(text.c_str() + at + 1 + key.size(), nullptr);
}

}  // namespace

ProcessUsage UsageOf(pid_t pid) {
  ProcessUsage usage;
  pid_t parent = 0;
  if (!StatOf(pid, usage.cpu_s, parent)) return usage;
  usage.alive = true;
  usage.rss_mib = StatusKiB(pid, "VmRSS:") / 1024.0;
  usage.peak_rss_mib = StatusKiB(pid, "VmHWM:") / 1024.0;
  return usage;
}

ProcessUsage TreeUsageOf(pid_t root) {
  ProcessUsage total = UsageOf(root);
  if (!total.alive) return total;
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return total;
  while (dirent* entry = readdir(proc)) {
    int pid = 0;
    if (!absl::SimpleAtoi(entry->d_name, &pid) || pid == root) continue;
    double cpu = 0;
    pid_t parent = 0;
    if (!StatOf(pid, cpu, parent) || parent != root) continue;
    total.cpu_s += cpu;
    total.rss_mib += StatusKiB(pid, "VmRSS:") / 1024.0;
  }
  closedir(proc);
  return total;
}

double MachineBusySeconds() {
  std::ifstream stat("/proc/stat");
  std::string cpu;
  double user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0;
  stat >> cpu >> user >> nice >> system >> idle >> iowait >> irq >> softirq;
  return (user + nice + system + irq + softirq) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

std::string LoadAverage() {
  std::ifstream file("/proc/loadavg");
  std::string one, five, fifteen;
  file >> one >> five >> fifteen;
  return one + " " + five + " " + fifteen;
}

}  // namespace parity::load
