// The Python bridge (python_bridge.h): embeds CPython on the first spec it is asked for, imports MODULE, reads
// FUNCTION's `flashcheck` declaration into a descriptor, and serves each callable through a forward trampoline of
// its own (fc_subject.forward carries no context: one slot per callable, kSlots of them per process).
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "flashcheck/python_bridge.h"

#include <dlfcn.h>

#include <array>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "flashcheck/dtype.h"
#include "flashcheck/mask_names.h"

namespace {

constexpr int kSlots = 16;

struct Slot {
  std::string spec, name, error;
  PyObject* function = nullptr;  // a strong reference, for the process's life
  bool host = false;
  std::vector<int32_t> head_dims;
  fc_subject subject{};
  fc_subject_limits limits{};
  fc_subject_value_dims value_dims{};
  bool has_limits = false, has_value_dims = false;
};

std::mutex g_mutex;
std::array<std::unique_ptr<Slot>, kSlots> g_slots;

// The Python error set now, as "Type: text", cleared.
std::string take_error() {
  PyObject *type = nullptr, *value = nullptr, *trace = nullptr;
  PyErr_Fetch(&type, &value, &trace);
  PyErr_NormalizeException(&type, &value, &trace);
  std::string out = "a Python error";
  if (value != nullptr) {
    PyObject* text = PyObject_Str(value);
    const char* type_name = type != nullptr ? reinterpret_cast<PyTypeObject*>(type)->tp_name : "Exception";
    out = std::string(type_name) + ": " + (text != nullptr && PyUnicode_Check(text) ? PyUnicode_AsUTF8(text) : "?");
    Py_XDECREF(text);
  }
  Py_XDECREF(type);
  Py_XDECREF(value);
  Py_XDECREF(trace);
  return out;
}

int code_of_exception() {
  if (PyErr_ExceptionMatches(PyExc_NotImplementedError)) return FC_SUBJECT_UNSUPPORTED;
  if (PyErr_ExceptionMatches(PyExc_ValueError)) return FC_SUBJECT_INVALID_ARGUMENT;
  return FC_SUBJECT_ERROR;
}

void copy_message(const std::string& message, char* err, size_t err_len) {
  if (err == nullptr || err_len == 0) return;
  const size_t n = std::min(message.size(), err_len - 1);
  message.copy(err, n);
  err[n] = '\0';
}

// ---- Reading the declaration --------------------------------------------------------------------------------

struct Declaration {
  PyObject* dict;
  std::string error;
  // The entry `key` (borrowed), or null.
  PyObject* get(const char* key) const { return PyDict_GetItemString(dict, key); }
  bool fail(const std::string& what) {
    if (error.empty()) error = what;
    return false;
  }
  bool boolean(const char* key, int32_t* out, int32_t fallback) {
    PyObject* v = get(key);
    if (v == nullptr) return (*out = fallback), true;
    const int truth = PyObject_IsTrue(v);
    if (truth < 0 || !PyBool_Check(v)) return fail(std::string(key) + ": True or False");
    *out = truth;
    return true;
  }
  bool integer(PyObject* v, const std::string& key, int64_t* out) {
    if (v == nullptr || !PyLong_Check(v)) return fail(key + ": an int");
    *out = PyLong_AsLongLong(v);
    if (PyErr_Occurred()) return PyErr_Clear(), fail(key + ": an int within int64");
    return true;
  }
  // A list of strings, each looked up by `find` (returns the value's code, or -1).
  template <typename Find>
  bool names(const char* key, uint32_t* bits, Find&& find, bool required) {
    PyObject* v = get(key);
    *bits = 0;
    if (v == nullptr) return required ? fail(std::string(key) + ": required") : true;
    if (!PyList_Check(v) && !PyTuple_Check(v)) return fail(std::string(key) + ": a list of names");
    PyObject* seq = PySequence_Fast(v, key);
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(seq); ++i) {
      PyObject* item = PySequence_Fast_GET_ITEM(seq, i);
      const char* text = PyUnicode_Check(item) ? PyUnicode_AsUTF8(item) : nullptr;
      const int code = text != nullptr ? find(std::string_view(text)) : -1;
      if (code < 0) {
        Py_DECREF(seq);
        return fail(std::string(key) + ": unknown name " + (text != nullptr ? "'" + std::string(text) + "'" : "(not a str)"));
      }
      *bits |= FC_SUBJECT_BIT(code);
    }
    Py_DECREF(seq);
    return true;
  }
  bool pair(const char* key, int64_t* lo, int64_t* hi) {
    PyObject* v = get(key);
    if (v == nullptr || !(PyList_Check(v) || PyTuple_Check(v)) || PySequence_Size(v) != 2) {
      return fail(std::string(key) + ": [min, max]");
    }
    PyObject* a = PySequence_GetItem(v, 0);
    PyObject* b = PySequence_GetItem(v, 1);
    const bool ok = integer(a, key, lo) && integer(b, key, hi);
    Py_XDECREF(a);
    Py_XDECREF(b);
    return ok;
  }
};

int dtype_code(std::string_view name) {
  for (const flashcheck::DTypeInfo& row : flashcheck::kDTypes) {
    if (name == row.name) return row.c_code;
  }
  return -1;
}
int mask_code(std::string_view name) {
  for (const flashcheck::MaskName& row : flashcheck::kMaskNames) {
    if (name == row.name) return row.c_code;
  }
  return -1;
}
int layout_code(std::string_view name) {
  return name == "bhsd" ? FC_SUBJECT_LAYOUT_BHSD : name == "bshd" ? FC_SUBJECT_LAYOUT_BSHD
                                                 : name == "strided" ? FC_SUBJECT_LAYOUT_STRIDED : -1;
}
int arithmetic_code(std::string_view name) {
  return name == "general-fp32"  ? FC_SUBJECT_ARITH_GENERAL_FP32
         : name == "tensor-core" ? FC_SUBJECT_ARITH_TENSOR_CORE
         : name == "split-tf32"  ? FC_SUBJECT_ARITH_SPLIT_TF32
         : name == "undeclared"  ? FC_SUBJECT_ARITH_UNDECLARED
                                 : -1;
}

bool read_declaration(PyObject* dict, Slot* s) {
  Declaration d{dict, ""};
  fc_subject_capabilities& c = s->subject.capabilities;
  PyObject* name = d.get("name");
  if (name == nullptr || !PyUnicode_Check(name)) {
    s->error = "name: a str";
    return false;
  }
  s->name = PyUnicode_AsUTF8(name);
  PyObject* memory = d.get("memory");
  const char* memory_text = memory != nullptr && PyUnicode_Check(memory) ? PyUnicode_AsUTF8(memory) : "device";
  if (std::strcmp(memory_text, "host") != 0 && std::strcmp(memory_text, "device") != 0) d.fail("memory: \"host\" or \"device\"");
  s->host = std::strcmp(memory_text, "host") == 0;
  c.memory = s->host ? FC_SUBJECT_MEMORY_HOST : FC_SUBJECT_MEMORY_DEVICE;
  d.names("dtypes", &c.dtypes, dtype_code, true);
  d.names("masks", &c.masks, mask_code, true);
  d.names("layouts", &c.layouts, layout_code, true);
  if (PyObject* dims = d.get("head_dims")) {
    PyObject* seq = PySequence_Fast(dims, "head_dims");
    if (seq == nullptr) {
      PyErr_Clear();
      s->error = "head_dims: a list of ints";
      return false;
    }
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(seq); ++i) {
      int64_t v = 0;
      if (d.integer(PySequence_Fast_GET_ITEM(seq, i), "head_dims", &v)) s->head_dims.push_back(static_cast<int32_t>(v));
    }
    Py_DECREF(seq);
    c.head_dims = s->head_dims.data();
    c.head_dim_count = static_cast<int32_t>(s->head_dims.size());
  } else {
    int64_t lo = 0, hi = 0;
    if (d.pair("head_dim", &lo, &hi)) {
      c.head_dim_min = static_cast<int32_t>(lo);
      c.head_dim_max = static_cast<int32_t>(hi);
    }
  }
  d.boolean("gqa", &c.gqa, 0);
  d.boolean("lse", &c.lse, 1);
  d.boolean("softcap", &c.softcap, 0);
  d.boolean("sink", &c.sink, 0);
  fc_subject_arithmetic& a = s->subject.arithmetic;
  if (PyObject* arith = d.get("arithmetic")) {
    if (!PyDict_Check(arith)) {
      d.fail("arithmetic: a dict of dtype name to class name");
    } else {
      PyObject *key = nullptr, *value = nullptr;
      Py_ssize_t at = 0;
      while (PyDict_Next(arith, &at, &key, &value)) {
        const int dtype = PyUnicode_Check(key) ? dtype_code(PyUnicode_AsUTF8(key)) : -1;
        const int cls = PyUnicode_Check(value) ? arithmetic_code(PyUnicode_AsUTF8(value)) : -1;
        if (dtype < 0 || cls < 0) {
          d.fail("arithmetic: {dtype: \"general-fp32\" | \"tensor-core\" | \"split-tf32\" | \"undeclared\"}");
          break;
        }
        a.arithmetic[dtype] = cls;
      }
    }
  }
  if (PyObject* tile = d.get("key_tile")) {
    int64_t v = 0;
    if (d.integer(tile, "key_tile", &v)) a.key_tile = static_cast<int32_t>(v);
  }
  if (d.get("head_dim_v") != nullptr) {
    int64_t lo = 0, hi = 0;
    if (d.pair("head_dim_v", &lo, &hi)) {
      s->value_dims = {static_cast<int32_t>(lo), static_cast<int32_t>(hi)};
      s->has_value_dims = true;
    }
  }
  if (PyObject* limits = d.get("limits")) {
    if (!PyDict_Check(limits)) d.fail("limits: a dict of fc_subject_limits' fields");
    const std::pair<const char*, int64_t*> fields[] = {
        {"seqlen_q_multiple", &s->limits.seqlen_q_multiple}, {"seqlen_k_multiple", &s->limits.seqlen_k_multiple},
        {"seqlen_q_min", &s->limits.seqlen_q_min},           {"seqlen_k_min", &s->limits.seqlen_k_min},
        {"seqlen_q_max", &s->limits.seqlen_q_max},           {"seqlen_k_max", &s->limits.seqlen_k_max}};
    for (const auto& [field, out] : fields) {
      if (PyDict_Check(limits)) {
        if (PyObject* v = PyDict_GetItemString(limits, field)) d.integer(v, std::string("limits.") + field, out);
      }
    }
    s->has_limits = true;
  }
  s->error = d.error;
  return d.error.empty();
}

// ---- The call -------------------------------------------------------------------------------------------------

const char* dtype_name(int32_t code) {
  for (const flashcheck::DTypeInfo& row : flashcheck::kDTypes) {
    if (row.c_code == code) return row.name;
  }
  return "?";
}
const char* mask_name(int32_t code) {
  for (const flashcheck::MaskName& row : flashcheck::kMaskNames) {
    if (row.c_code == code) return row.name;
  }
  return "?";
}

// One tensor's view: its shape and byte strides, kept alive for the call.
struct View {
  void* data = nullptr;
  bool writable = false;
  int ndim = 0;
  Py_ssize_t shape[4] = {}, strides[4] = {};
  Py_ssize_t itemsize = 0;
  const char* format = "f";     // buffer-protocol format
  const char* typestr = "<f4";  // __cuda_array_interface__'s
  Py_buffer buffer{};
  PyObject* object = nullptr;   // the memoryview or the interface object (owned)
};

void describe(View* v, const void* data, bool writable, int32_t dtype, std::initializer_list<int64_t> shape,
              std::initializer_list<int64_t> element_strides) {
  v->data = const_cast<void*>(data);
  v->writable = writable;
  v->ndim = static_cast<int>(shape.size());
  const bool f32 = dtype == FC_SUBJECT_DTYPE_F32, f16 = dtype == FC_SUBJECT_DTYPE_F16;
  v->itemsize = f32 ? 4 : 2;
  v->format = f32 ? "f" : f16 ? "e" : "H";
  v->typestr = f32 ? "<f4" : f16 ? "<f2" : "<u2";
  int i = 0;
  for (int64_t n : shape) v->shape[i++] = static_cast<Py_ssize_t>(n);
  i = 0;
  for (int64_t st : element_strides) v->strides[i++] = static_cast<Py_ssize_t>(st) * v->itemsize;
}

PyObject* tuple_of(const Py_ssize_t* values, int n) {
  PyObject* t = PyTuple_New(n);
  for (int i = 0; i < n; ++i) PyTuple_SET_ITEM(t, i, PyLong_FromSsize_t(values[i]));
  return t;
}

// The Python object for a view: a memoryview (host) or an object carrying __cuda_array_interface__ (device).
PyObject* make_object(View* v, bool host, void* stream, PyObject* namespace_type) {
  if (v->data == nullptr) Py_RETURN_NONE;
  if (host) {
    Py_ssize_t elements = 1;
    for (int i = 0; i < v->ndim; ++i) elements *= v->shape[i];
    v->buffer.buf = v->data;
    v->buffer.obj = nullptr;
    v->buffer.len = elements * v->itemsize;
    v->buffer.itemsize = v->itemsize;
    v->buffer.readonly = v->writable ? 0 : 1;
    v->buffer.ndim = v->ndim;
    v->buffer.format = const_cast<char*>(v->format);
    v->buffer.shape = v->shape;
    v->buffer.strides = v->strides;
    v->buffer.suboffsets = nullptr;
    v->object = PyMemoryView_FromBuffer(&v->buffer);
    return v->object;
  }
  PyObject* interface = Py_BuildValue("{s:N,s:s,s:(N,O),s:N,s:i,s:N}", "shape", tuple_of(v->shape, v->ndim), "typestr",
                                      v->typestr, "data", PyLong_FromVoidPtr(v->data), v->writable ? Py_False : Py_True,
                                      "strides", tuple_of(v->strides, v->ndim), "version", 3, "stream",
                                      stream != nullptr ? PyLong_FromVoidPtr(stream) : PyLong_FromLong(1));
  if (interface == nullptr) return nullptr;
  PyObject* kwargs = Py_BuildValue("{s:N}", "__cuda_array_interface__", interface);
  PyObject* empty = PyTuple_New(0);
  v->object = PyObject_Call(namespace_type, empty, kwargs);
  Py_DECREF(empty);
  Py_DECREF(kwargs);
  return v->object;
}

int call_slot(Slot& slot, const fc_subject_problem* p, const fc_subject_buffers* b, void* stream, char* err,
              size_t err_len) {
  const PyGILState_STATE gil = PyGILState_Ensure();
  int code = FC_SUBJECT_OK;
  std::array<View, 6> views;
  View &q = views[0], &k = views[1], &v = views[2], &o = views[3], &lse = views[4], &sink = views[5];
  const int64_t dv = p->head_dim_v;
  describe(&q, b->q, false, p->dtype, {p->batch, p->heads_q, p->seqlen_q, p->head_dim},
           {p->q_stride.batch, p->q_stride.head, p->q_stride.row, 1});
  describe(&k, b->k, false, p->dtype, {p->batch, p->heads_kv, p->seqlen_k, p->head_dim},
           {p->k_stride.batch, p->k_stride.head, p->k_stride.row, 1});
  describe(&v, b->v, false, p->dtype, {p->batch, p->heads_kv, p->seqlen_k, dv},
           {p->v_stride.batch, p->v_stride.head, p->v_stride.row, 1});
  describe(&o, b->o, true, p->dtype, {p->batch, p->heads_q, p->seqlen_q, dv},
           {p->o_stride.batch, p->o_stride.head, p->o_stride.row, 1});
  describe(&lse, b->lse, true, FC_SUBJECT_DTYPE_F32, {p->batch, p->heads_q, p->seqlen_q},
           {p->heads_q * p->seqlen_q, p->seqlen_q, 1});
  describe(&sink, b->sink, false, FC_SUBJECT_DTYPE_F32, {p->heads_q}, {1});
  PyObject* types = PyImport_ImportModule("types");
  PyObject* namespace_type = types != nullptr ? PyObject_GetAttrString(types, "SimpleNamespace") : nullptr;
  PyObject* buffers = PyDict_New();
  PyObject* problem = nullptr;
  const char* names[] = {"q", "k", "v", "o", "lse", "sink"};
  bool built = namespace_type != nullptr;
  for (size_t i = 0; built && i < views.size(); ++i) {
    PyObject* object = make_object(&views[i], slot.host, stream, namespace_type);
    built = object != nullptr && PyDict_SetItemString(buffers, names[i], object) == 0;
    if (views[i].data == nullptr) Py_XDECREF(object);  // Py_RETURN_NONE's reference
  }
  if (built) {
    problem = Py_BuildValue(
        "{s:s,s:s,s:L,s:L,s:L,s:L,s:L,s:L,s:L,s:d,s:L,s:L,s:d,s:N}", "dtype", dtype_name(p->dtype), "mask",
        mask_name(p->mask), "batch", static_cast<long long>(p->batch), "heads_q", static_cast<long long>(p->heads_q),
        "heads_kv", static_cast<long long>(p->heads_kv), "seqlen_q", static_cast<long long>(p->seqlen_q), "seqlen_k",
        static_cast<long long>(p->seqlen_k), "head_dim", static_cast<long long>(p->head_dim), "head_dim_v",
        static_cast<long long>(dv), "softmax_scale", static_cast<double>(p->softmax_scale), "window_left",
        static_cast<long long>(p->window_left), "window_right", static_cast<long long>(p->window_right), "softcap",
        static_cast<double>(p->softcap), "stream", PyLong_FromVoidPtr(stream));
    built = problem != nullptr;
  }
  if (!built) {
    copy_message("building the call's arguments: " + take_error(), err, err_len);
    code = FC_SUBJECT_ERROR;
  } else {
    PyObject* result = PyObject_CallFunctionObjArgs(slot.function, problem, buffers, nullptr);
    if (result == nullptr) {
      code = code_of_exception();
      copy_message(take_error(), err, err_len);
    } else if (result != Py_None) {
      code = FC_SUBJECT_ERROR;
      copy_message("the subject returned something other than None (it writes O and LSE in place)", err, err_len);
    }
    Py_XDECREF(result);
  }
  // The views die with the call: a memoryview kept by the subject raises on use from now on.
  for (View& view : views) {
    if (view.object != nullptr && slot.host) {
      PyObject* released = PyObject_CallMethod(view.object, "release", nullptr);
      if (released == nullptr) PyErr_Clear();
      Py_XDECREF(released);
    }
    Py_XDECREF(view.object);
  }
  Py_XDECREF(problem);
  Py_XDECREF(buffers);
  Py_XDECREF(namespace_type);
  Py_XDECREF(types);
  PyGILState_Release(gil);
  return code;
}

template <int N>
int forward_slot(const fc_subject_problem* p, const fc_subject_buffers* b, void* stream, char* err, size_t err_len) {
  return call_slot(*g_slots[N], p, b, stream, err, err_len);
}
template <int... N>
constexpr auto make_trampolines(std::integer_sequence<int, N...>) {
  return std::array<decltype(&forward_slot<0>), sizeof...(N)>{&forward_slot<N>...};
}
constexpr auto kTrampolines = make_trampolines(std::make_integer_sequence<int, kSlots>{});

// CPython, started once; the main thread lets go of the GIL so that any thread may call in.
void start_python() {
  if (Py_IsInitialized()) return;
  // Extension modules (numpy's, torch's) take the interpreter's symbols from the global scope, where a subject
  // library loaded RTLD_LOCAL does not put them: promote libpython.
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&Py_InitializeEx), &info) != 0 && info.dli_fname != nullptr) {
    dlopen(info.dli_fname, RTLD_NOW | RTLD_GLOBAL | RTLD_NOLOAD);
  }
  Py_InitializeEx(0);
  PyRun_SimpleString("import os, sys\nsys.path.insert(0, os.getcwd())\n");
  PyEval_SaveThread();
}

// The answer for a spec that cannot be served (the slot is freed; the text lives until the next failure).
fc_subject_python failure(int slot, std::string why) {
  static std::string last;
  last = std::move(why);
  g_slots[slot].reset();
  return {nullptr, nullptr, nullptr, last.c_str()};
}

}  // namespace

fc_subject_python fc_subject_python_v1(const char* spec) {
  std::lock_guard<std::mutex> lock(g_mutex);
  static std::string no_slot;
  int free_slot = -1;
  for (int i = 0; i < kSlots; ++i) {
    if (g_slots[i] && g_slots[i]->spec == spec) {
      const Slot& s = *g_slots[i];
      return {&s.subject, s.has_limits ? &s.limits : nullptr, s.has_value_dims ? &s.value_dims : nullptr, nullptr};
    }
    if (!g_slots[i] && free_slot < 0) free_slot = i;
  }
  if (free_slot < 0) {
    no_slot = "at most " + std::to_string(kSlots) + " Python subjects per process";
    return {nullptr, nullptr, nullptr, no_slot.c_str()};
  }
  g_slots[free_slot] = std::make_unique<Slot>();
  Slot* s = g_slots[free_slot].get();
  s->spec = spec;
  const std::string text(spec);
  const size_t colon = text.rfind(':');
  if (text.rfind(FC_SUBJECT_PYTHON_PREFIX, 0) != 0 || colon <= std::strlen(FC_SUBJECT_PYTHON_PREFIX)) {
    return failure(free_slot, "not python:MODULE:FUNCTION");
  }
  const std::string module_name = text.substr(std::strlen(FC_SUBJECT_PYTHON_PREFIX), colon - std::strlen(FC_SUBJECT_PYTHON_PREFIX));
  const std::string function_name = text.substr(colon + 1);
  start_python();
  const PyGILState_STATE gil = PyGILState_Ensure();
  fc_subject_python out{nullptr, nullptr, nullptr, nullptr};
  PyObject* module = PyImport_ImportModule(module_name.c_str());
  PyObject* function = module != nullptr ? PyObject_GetAttrString(module, function_name.c_str()) : nullptr;
  PyObject* declaration = function != nullptr ? PyObject_GetAttrString(function, "flashcheck") : nullptr;
  if (module == nullptr) {
    out = failure(free_slot, "cannot import " + module_name + ": " + take_error());
  } else if (function == nullptr) {
    out = failure(free_slot, module_name + " has no " + function_name + ": " + take_error());
  } else if (!PyCallable_Check(function)) {
    out = failure(free_slot, module_name + "." + function_name + " is not callable");
  } else if (declaration == nullptr || !PyDict_Check(declaration)) {
    if (declaration == nullptr) PyErr_Clear();
    out = failure(free_slot, module_name + "." + function_name +
                         ": no `flashcheck` declaration (a dict attribute; flashcheck_subject.subject() writes it)");
  } else if (!read_declaration(declaration, s)) {
    out = failure(free_slot, module_name + "." + function_name + ": flashcheck declaration: " + s->error);
  } else {
    s->function = function;
    Py_INCREF(function);
    s->subject.abi_version = FC_SUBJECT_ABI_VERSION;
    s->subject.name = s->name.c_str();
    s->subject.forward = kTrampolines[free_slot];
    out = {&s->subject, s->has_limits ? &s->limits : nullptr, s->has_value_dims ? &s->value_dims : nullptr, nullptr};
  }
  Py_XDECREF(declaration);
  Py_XDECREF(function);
  Py_XDECREF(module);
  PyGILState_Release(gil);
  return out;
}
