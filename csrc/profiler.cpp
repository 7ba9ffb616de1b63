// torch.profiler on the neuron device: the two hooks PyTorch gives a
// PrivateUse1 backend.
//
// 1. Profiler stubs (torch/csrc/profiler/stubs/base.h) serve the legacy
//    `torch.autograd.profiler.profile(use_device="neuron")` path
//    (KINETO_PRIVATEUSE1_FALLBACK), which records a device event before and
//    after every op. Without them PyTorch's default stubs raise "PrivateUse1
//    used in profiler but not enabled" twice per op (about 45x slower, garbage
//    end times). The virtual core runs each op synchronously on the host, so an
//    event is the host time at which it is recorded and `elapsed` is the
//    measured time of the op on the virtual core.
//
// 2. A Kineto activity profiler (REGISTER_PRIVATEUSE1_PROFILER) serves
//    `ProfilerActivity.PrivateUse1`. While a session records, a global
//    RecordFunction observer notes every op that ran on neuron and did no
//    further neuron op inside it (the device kernels: `mm` under `matmul`),
//    with its argument shapes, its host time and the Kineto correlation id of
//    its CPU event. When the trace is processed, a Python estimator
//    (torch_neuronx/profiling/_device_track.py) turns the notes into estimated
//    Trainium durations; the session lays them out per (core, stream) in issue
//    order and hands them to Kineto as device kernels linked to their CPU ops,
//    which is how PyTorch fills the device-time columns of key_averages() and
//    the device rows of the Chrome trace. Nothing here runs unless a session
//    with the PrivateUse1 activity is recording.
#define USE_KINETO 1  // the installed torch is built with Kineto; its headers need the flag
// Kineto's headers format metadata with fmt, whose compiled part libtorch keeps private.
#define FMT_HEADER_ONLY 1

#include "neuron_core.h"

#include <ATen/record_function.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/util/ApproximateClock.h>
#include <c10/util/irange.h>
#include <torch/csrc/jit/python/pybind_utils.h>
#include <torch/csrc/profiler/standalone/privateuse1_profiler.h>
#include <torch/csrc/profiler/stubs/base.h>
#include <torch/csrc/utils/pybind.h>

#include <GenericTraceActivity.h>
#include <IActivityProfiler.h>
#include <libkineto.h>
#include <output_base.h>

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace torch_neuronx {
namespace {

// ---------------------------------------------------------------------------
// 1. Legacy profiler stubs
// ---------------------------------------------------------------------------

struct NeuronProfilerStubs final : public torch::profiler::impl::ProfilerStubs {
  void record(c10::DeviceIndex* device, torch::profiler::impl::ProfilerVoidEventStub* event,
              int64_t* cpu_ns) const override {
    if (device) *device = current_device();
    const int64_t now = c10::getTime();
    if (event) *event = std::make_shared<int64_t>(now);
    if (cpu_ns) *cpu_ns = now;
  }
  float elapsed(const torch::profiler::impl::ProfilerVoidEventStub* start,
                const torch::profiler::impl::ProfilerVoidEventStub* end) const override {
    if (!start || !end || !*start || !*end) return 0.f;
    const int64_t t0 = *static_cast<const int64_t*>(start->get());
    const int64_t t1 = *static_cast<const int64_t*>(end->get());
    return static_cast<float>(t1 - t0) / 1000.f;  // microseconds, as CUDA's stubs
  }
  // The virtual core has no range-annotation API (NVTX's role): nothing to mark.
  void mark(const char*) const override {}
  void rangePush(const char*) const override {}
  void rangePop() const override {}
  bool enabled() const override { return true; }
  void onEachDevice(std::function<void(int)> op) const override {
    const c10::DeviceIndex previous = current_device();
    for (const auto i : c10::irange(device_count())) {
      set_current_device(i);
      op(i);
    }
    if (device_count() > 0) set_current_device(previous);
  }
  void synchronize() const override {}  // every op has completed when it returns
};

struct RegisterStubs {
  RegisterStubs() {
    static NeuronProfilerStubs stubs;
    torch::profiler::impl::registerPrivateUse1Methods(&stubs);
  }
} g_register_stubs;

// ---------------------------------------------------------------------------
// 2. Estimated device track
// ---------------------------------------------------------------------------

// Shape of one tensor argument, enough to rebuild it as a meta tensor.
struct TensorShape {
  std::vector<int64_t> sizes;
  std::vector<int64_t> strides;
  c10::ScalarType dtype = c10::ScalarType::Float;
  bool on_neuron = false;
};

// One argument or result: a tensor, a list of (optional) tensors, or any
// other value kept as is (ints, floats, lists of ints, strings, None).
struct ArgNote {
  enum Kind { kTensor, kTensorList, kValue } kind = kValue;
  std::vector<std::optional<TensorShape>> tensors;
  c10::IValue value;
};

struct OpNote {
  std::string name;      // "aten::mm"
  std::string overload;  // "" for the default overload
  c10::DeviceIndex device = 0;
  c10::StreamId stream = 0;
  int64_t host_start_ns = 0;
  int64_t host_end_ns = 0;
  uint64_t correlation_id = 0;
  std::vector<ArgNote> inputs;
  std::vector<ArgNote> outputs;
};

std::atomic<bool> g_recording{false};
std::mutex g_notes_mutex;
std::vector<OpNote> g_notes;   // guarded by g_notes_mutex

// Kineto's correlation id of the innermost CPU op on this thread: PyTorch
// pushes it when the op begins and pops it when it ends, after our (global)
// observer has run, so at our exit callback the top is the op's own id.
thread_local std::vector<uint64_t> t_correlation;

struct OpFrame final : public at::ObserverContext {
  int64_t start_ns = 0;
  // Inputs are noted when the op begins: RecordFunction's view of them is
  // only valid during the start callback (the dispatcher frees its boxed copy).
  std::vector<ArgNote> inputs;
  c10::DeviceIndex input_device = -1;
  bool neuron_child = false;  // a nested op already ran on neuron
  OpFrame* parent = nullptr;
};
thread_local OpFrame* t_frame = nullptr;

std::optional<TensorShape> shape_of(const at::Tensor& t) {
  if (!t.defined()) return std::nullopt;
  TensorShape s;
  s.sizes = t.sizes().vec();
  if (t.layout() == c10::kStrided) s.strides = t.strides().vec();
  s.dtype = t.scalar_type();
  s.on_neuron = t.device().type() == kNeuron;
  return s;
}

// Records `v`; returns the neuron device it lives on, or -1.
c10::DeviceIndex note_value(const c10::IValue& v, std::vector<ArgNote>& out) {
  ArgNote note;
  c10::DeviceIndex device = -1;
  auto add = [&](const at::Tensor& t) {
    note.tensors.push_back(shape_of(t));
    if (t.defined() && t.device().type() == kNeuron && device < 0) device = t.device().index();
  };
  if (v.isTensor()) {
    note.kind = ArgNote::kTensor;
    add(v.toTensor());
  } else if (v.isTensorList()) {
    note.kind = ArgNote::kTensorList;
    for (const at::Tensor& t : v.toTensorList()) add(t);
  } else if (v.isList() && !v.toListRef().empty() &&
             (v.toListRef()[0].isTensor() || v.toListRef()[0].isNone())) {
    note.kind = ArgNote::kTensorList;  // List[Optional[Tensor]] (index)
    for (const c10::IValue& e : v.toListRef()) {
      if (e.isTensor()) add(e.toTensor());
      else note.tensors.emplace_back(std::nullopt);
    }
  } else if (v.isInt() || v.isDouble() || v.isBool() || v.isNone() || v.isIntList() ||
             v.isDoubleList() || v.isBoolList() || v.isString() || v.isScalar() ||
             v.isDevice()) {
    note.value = v;
  }  // other values (generators, objects) carry nothing the estimate needs
  out.push_back(std::move(note));
  return device;
}

std::unique_ptr<at::ObserverContext> on_op_enter(const at::RecordFunction& fn) {
  if (!g_recording.load(std::memory_order_relaxed)) return nullptr;
  auto frame = std::make_unique<OpFrame>();
  for (const c10::IValue& v : fn.inputs()) {
    const auto d = note_value(v, frame->inputs);
    if (frame->input_device < 0) frame->input_device = d;
  }
  frame->start_ns = c10::getTime();
  frame->parent = t_frame;
  t_frame = frame.get();
  return frame;
}

void on_op_exit(const at::RecordFunction& fn, at::ObserverContext* ctx) {
  auto* frame = static_cast<OpFrame*>(ctx);
  if (frame == nullptr) return;
  t_frame = frame->parent;
  if (!g_recording.load(std::memory_order_relaxed)) return;
  OpNote note;
  c10::DeviceIndex device = frame->input_device;
  for (const c10::IValue& v : fn.outputs()) {
    const auto d = note_value(v, note.outputs);
    if (device < 0) device = d;
  }
  if (device < 0) return;  // a host op
  if (frame->parent) frame->parent->neuron_child = true;
  if (frame->neuron_child) return;  // a composite: its kernels are noted already
  note.host_end_ns = c10::getTime();
  note.host_start_ns = frame->start_ns;
  note.inputs = std::move(frame->inputs);
  note.name = fn.name();
  if (const auto op = fn.operator_name()) note.overload = op->overload_name;
  note.device = device;
  note.stream = c10::impl::getDeviceGuardImpl(kNeuron)
                    ->getStream(c10::Device(kNeuron, device))
                    .id();
  note.correlation_id = t_correlation.empty() ? 0 : t_correlation.back();
  std::lock_guard<std::mutex> lock(g_notes_mutex);
  g_notes.push_back(std::move(note));
}

py::object to_python(const ArgNote& note) {
  auto tensor = [](const std::optional<TensorShape>& s) -> py::object {
    if (!s) return py::none();
    at::Tensor meta = s->strides.size() == s->sizes.size()
                          ? at::empty_strided(s->sizes, s->strides,
                                              at::TensorOptions().dtype(s->dtype).device(at::kMeta))
                          : at::empty(s->sizes, at::TensorOptions().dtype(s->dtype).device(at::kMeta));
    return py::cast(meta);
  };
  if (note.kind == ArgNote::kTensor) return tensor(note.tensors.at(0));
  if (note.kind == ArgNote::kTensorList) {
    py::list items;
    for (const auto& s : note.tensors) items.append(tensor(s));
    return std::move(items);
  }
  return torch::jit::toPyObject(note.value);
}

py::object device_track() {
  return py::module_::import("torch_neuronx.profiling._device_track");
}

// An event of the device track: a noted op, or a compiled graph / collective
// that the Python side recorded (those have no Kineto correlation id).
struct TrackEvent {
  std::string name;
  c10::DeviceIndex device = 0;
  c10::StreamId stream = 0;
  int64_t host_start_ns = 0;
  int64_t host_end_ns = 0;
  uint64_t correlation_id = 0;
  double seconds = 0.0;
  py::dict meta;
};

// The estimated events, from torch_neuronx/profiling/_device_track.py (which
// imports the cost model on first use, so nothing is loaded until a trace with
// the PrivateUse1 activity is processed). Runs with the GIL.
std::vector<TrackEvent> estimate(const std::vector<OpNote>& notes) {
  py::list batch;
  for (const OpNote& n : notes) {
    py::list inputs, outputs;
    for (const auto& a : n.inputs) inputs.append(to_python(a));
    for (const auto& a : n.outputs) outputs.append(to_python(a));
    batch.append(py::make_tuple(n.name, n.overload, static_cast<int>(n.device), inputs, outputs,
                                n.host_start_ns, n.host_end_ns));
  }
  // -> ([(seconds, meta) per note], [(name, device, stream, start_ns, end_ns, seconds, meta)])
  py::tuple result = device_track().attr("estimate_ops")(batch);
  py::list per_note = result[0];
  py::list programs = result[1];
  TORCH_CHECK(per_note.size() == notes.size(), "profiler estimator returned ", per_note.size(),
              " results for ", notes.size(), " ops");
  std::vector<TrackEvent> events;
  for (const auto i : c10::irange(notes.size())) {
    py::tuple r = per_note[i];
    const double seconds = r[0].cast<double>();
    if (!(seconds > 0.0)) continue;  // no device work (views, allocation)
    const OpNote& n = notes[i];
    events.push_back({n.name, n.device, n.stream, n.host_start_ns, n.host_end_ns,
                      n.correlation_id, seconds, r[1].cast<py::dict>()});
  }
  for (const auto& item : programs) {
    py::tuple p = item.cast<py::tuple>();
    events.push_back({p[0].cast<std::string>(), p[1].cast<c10::DeviceIndex>(),
                      p[2].cast<c10::StreamId>(), p[3].cast<int64_t>(), p[4].cast<int64_t>(), 0,
                      p[5].cast<double>(), p[6].cast<py::dict>()});
  }
  std::stable_sort(events.begin(), events.end(), [](const TrackEvent& a, const TrackEvent& b) {
    return a.host_start_ns < b.host_start_ns;
  });
  return events;
}

void add_metadata(libkineto::GenericTraceActivity& act, const py::dict& meta) {
  for (const auto& item : meta) {
    const std::string key = py::str(item.first);
    if (py::isinstance<py::bool_>(item.second)) {
      act.addMetadata(key, item.second.cast<bool>() ? "true" : "false");
    } else if (py::isinstance<py::int_>(item.second)) {
      act.addMetadata(key, item.second.cast<int64_t>());
    } else if (py::isinstance<py::float_>(item.second)) {
      act.addMetadata(key, item.second.cast<double>());
    } else {
      act.addMetadataQuoted(key, py::str(item.second).cast<std::string>());
    }
  }
}

// Calls device_track.<fn>() for the session's start/stop; a failure there
// loses the compiled-graph and collective events, never the trace.
void call_device_track(const char* fn) {
  py::gil_scoped_acquire gil;
  try {
    device_track().attr(fn)();
  } catch (const std::exception& e) {
    TORCH_WARN("torch_neuronx profiler: device_track.", fn, " failed: ", e.what());
  }
}

class NeuronProfilerSession final : public libkineto::IActivityProfilerSession {
 public:
  void start() override {
    {
      std::lock_guard<std::mutex> lock(g_notes_mutex);
      g_notes.clear();
    }
    start_ns_ = c10::getTime();
    handle_ = at::addGlobalCallback(at::RecordFunctionCallback(on_op_enter, on_op_exit)
                                        .needsInputs(true)
                                        .needsOutputs(true)
                                        .scopes({at::RecordScope::FUNCTION}));
    g_recording.store(true);
    call_device_track("begin_session");  // compiled graphs and collectives (Python side)
    status_ = libkineto::TraceStatus::RECORDING;
  }

  void stop() override {
    g_recording.store(false);
    if (handle_) at::removeCallback(handle_);
    handle_ = 0;
    end_ns_ = c10::getTime();
    call_device_track("end_session");
    status_ = libkineto::TraceStatus::PROCESSING;
  }

  std::vector<std::string> errors() override { return errors_; }

  void processTrace(libkineto::ActivityLogger& logger) override {
    processTrace(logger, [](int32_t) -> const libkineto::ITraceActivity* { return nullptr; }, 0, 0);
  }

  void processTrace(libkineto::ActivityLogger& logger,
                    libkineto::getLinkedActivityCallback linked_activity, int64_t,
                    int64_t) override {
    std::vector<OpNote> notes;
    {
      std::lock_guard<std::mutex> lock(g_notes_mutex);
      notes.swap(g_notes);
    }
    buffer_ = std::make_unique<libkineto::CpuTraceBuffer>();
    buffer_->span = libkineto::TraceSpan(start_ns_, end_ns_, "neuron (estimated)");
    buffer_->gpuOpCount = -1;
    py::gil_scoped_acquire gil;
    std::vector<TrackEvent> events;
    try {
      events = estimate(notes);
    } catch (const std::exception& e) {
      errors_.push_back(std::string("neuron device-track estimate failed: ") + e.what());
      TORCH_WARN("torch_neuronx profiler: the estimated device track is empty because the "
                 "estimate failed: ", e.what());
      return;
    }
    // Stream order: a kernel starts when its stream is free and the host has
    // issued it, whichever is later.
    std::map<std::pair<c10::DeviceIndex, c10::StreamId>, int64_t> stream_free_ns;
    std::string label = "estimated Trainium time";
    for (const TrackEvent& ev : events) {
      int64_t& free_ns = stream_free_ns[{ev.device, ev.stream}];
      const int64_t begin = std::max(free_ns, ev.host_start_ns);
      const int64_t end = begin + std::max<int64_t>(1, static_cast<int64_t>(ev.seconds * 1e9));
      free_ns = end;
      // A distinct name, as CUDA kernels have: key_averages() lists the estimated
      // kernel on its own row next to the measured CPU op.
      buffer_->emplace_activity(buffer_->span, libkineto::ActivityType::CONCURRENT_KERNEL,
                                ev.name + " [estimated]");
      libkineto::GenericTraceActivity& act = *buffer_->activities.back();
      act.startTime = begin;
      act.endTime = end;
      act.device = ev.device;
      act.resource = static_cast<int32_t>(ev.stream);
      act.id = static_cast<int32_t>(ev.correlation_id);
      act.linked = ev.correlation_id ? linked_activity(static_cast<int32_t>(ev.correlation_id))
                                     : nullptr;
      act.addMetadataQuoted("estimate", "Trainium device time (estimated, not measured)");
      act.addMetadata("device", static_cast<int>(ev.device));
      act.addMetadata("stream", ev.stream);
      act.addMetadata("host us", (ev.host_end_ns - ev.host_start_ns) / 1000.0);
      add_metadata(act, ev.meta);
      if (ev.meta.contains("instance")) {
        label = "estimated Trainium time (" + py::str(ev.meta["instance"]).cast<std::string>() + ")";
      }
      act.log(logger);
      streams_.insert({ev.device, ev.stream});
    }
    // One trace process per logical core, one row per stream, named so that a
    // reader cannot take them for measurements. Kineto copies these infos.
    std::set<c10::DeviceIndex> devices;
    for (const auto& s : streams_) devices.insert(s.first);
    if (devices.empty()) devices.insert(current_device());
    for (const c10::DeviceIndex d : devices) {
      libkineto::DeviceInfo info{d, d + libkineto::kExceedMaxPid,
                                 "neuron:" + std::to_string(d) + " " + label,
                                 "neuron:" + std::to_string(d) + " (estimated)"};
      if (!first_device_) {
        first_device_ = std::make_unique<libkineto::DeviceInfo>(info);
      } else {
        logger.handleDeviceInfo(info, start_ns_);
      }
    }
    for (const auto& s : streams_) {
      logger.handleResourceInfo(
          libkineto::ResourceInfo{s.second, s.second, s.first,
                                  "stream " + std::to_string(s.second) + " (estimated)"},
          start_ns_);
    }
  }

  // Returning one (not nullptr) also keeps Kineto from naming pids 0-15 "GPU N".
  std::unique_ptr<libkineto::DeviceInfo> getDeviceInfo() override {
    if (!first_device_) {
      const c10::DeviceIndex d = current_device();
      return std::make_unique<libkineto::DeviceInfo>(libkineto::DeviceInfo{
          d, d + libkineto::kExceedMaxPid, "neuron:" + std::to_string(d) + " estimated Trainium time",
          "neuron:" + std::to_string(d) + " (estimated)"});
    }
    return std::make_unique<libkineto::DeviceInfo>(*first_device_);
  }
  std::vector<libkineto::ResourceInfo> getResourceInfos() override { return {}; }

  // Kineto keeps pointers to the activities logged above; it owns them from here.
  std::unique_ptr<libkineto::CpuTraceBuffer> getTraceBuffer() override {
    return std::move(buffer_);
  }

  void pushCorrelationId(uint64_t id) override { t_correlation.push_back(id); }
  void popCorrelationId() override {
    if (!t_correlation.empty()) t_correlation.pop_back();
  }

  ~NeuronProfilerSession() override {
    if (handle_) {
      g_recording.store(false);
      at::removeCallback(handle_);
    }
  }

 private:
  int64_t start_ns_ = 0;
  int64_t end_ns_ = 0;
  at::CallbackHandle handle_ = 0;
  std::vector<std::string> errors_;
  std::set<std::pair<c10::DeviceIndex, c10::StreamId>> streams_;
  std::unique_ptr<libkineto::CpuTraceBuffer> buffer_;
  std::unique_ptr<libkineto::DeviceInfo> first_device_;
};

class NeuronActivityProfiler final : public libkineto::IActivityProfiler {
 public:
  const std::string& name() const override { return name_; }
  const std::set<libkineto::ActivityType>& availableActivities() const override {
    return activities_;
  }
  std::unique_ptr<libkineto::IActivityProfilerSession> configure(
      const std::set<libkineto::ActivityType>& types, const libkineto::Config&) override {
    // CPU-only profiling selects no device activity: no session, no cost.
    if (!types.count(libkineto::ActivityType::CONCURRENT_KERNEL)) return nullptr;
    return std::make_unique<NeuronProfilerSession>();
  }
  std::unique_ptr<libkineto::IActivityProfilerSession> configure(
      int64_t, int64_t, const std::set<libkineto::ActivityType>& types,
      const libkineto::Config& config) override {
    return configure(types, config);
  }

 private:
  std::string name_{"neuron"};
  std::set<libkineto::ActivityType> activities_{libkineto::ActivityType::CONCURRENT_KERNEL};
};

REGISTER_PRIVATEUSE1_PROFILER(NeuronActivityProfiler);

}  // namespace
}  // namespace torch_neuronx
