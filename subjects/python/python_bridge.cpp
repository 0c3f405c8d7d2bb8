// The Python bridge (python_bridge.h): embeds CPython on the first spec it is asked for, imports MODULE, reads
// FUNCTION's `flashcheck` declaration into a descriptor, and serves each callable through a forward trampoline of
// its own (fc_subject.forward carries no context: one slot per callable, kSlots of them per process).
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "flashcheck/python_bridge.h"

#include <dlfcn.h>

#include <array>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "flashcheck/dtype.h"
#include "flashcheck/mask_names.h"

namespace {

constexpr int kSlots = 16;

struct Slot {
  std::string spec, name, error;
  PyObject* function = nullptr;           // strong references, for the process's life
  PyObject* backward_function = nullptr;  // the declared backward's callable, or null
  std::string backward_name;
  bool host = false;
  std::vector<int32_t> head_dims;
  fc_subject subject{};
  fc_subject_limits limits{};
  fc_subject_value_dims value_dims{};
  fc_subject_sequences sequences{};
  fc_subject_backward backward{};
  fc_subject_dropout dropout{};
  fc_subject_fp8 fp8{};
  fc_subject_fp8_head_dims fp8_head_dims{1};
  bool has_limits = false, has_value_dims = false, has_sequences = false, has_backward = false, has_dropout = false;
  bool has_fp8 = false, has_fp8_head_dims = false;
  int32_t dropout_backward = 0;  // the dropout's backward is the declared backward callable
};

std::mutex g_mutex;
PyObject* g_namespace_type = nullptr;  // types.SimpleNamespace: the device views' carrier, looked up once
std::array<std::unique_ptr<Slot>, kSlots> g_slots;

// A str's UTF-8 text, or "" (the error cleared) where it has none.
const char* utf8(PyObject* text) {
  const char* out = text != nullptr && PyUnicode_Check(text) ? PyUnicode_AsUTF8(text) : nullptr;
  if (out == nullptr) PyErr_Clear();
  return out != nullptr ? out : "";
}

// The Python error set now, as "Type: text", cleared.
std::string take_error() {
  PyObject *type = nullptr, *value = nullptr, *trace = nullptr;
  PyErr_Fetch(&type, &value, &trace);
  PyErr_NormalizeException(&type, &value, &trace);
  std::string out = "a Python error";
  if (value != nullptr) {
    PyObject* text = PyObject_Str(value);
    const char* type_name = type != nullptr ? reinterpret_cast<PyTypeObject*>(type)->tp_name : "Exception";
    out = std::string(type_name) + ": " + utf8(text);
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

// A message longer than the caller's buffer keeps its head and its tail: a Python error's cause comes last (Triton's
// CompilationError quotes the kernel's source up to the failing line and names the error after it).
void copy_message(const std::string& message, char* err, size_t err_len) {
  if (err == nullptr || err_len == 0) return;
  constexpr std::string_view kCut = " [...] ";
  std::string text = message;
  if (text.size() > err_len - 1 && err_len - 1 > 3 * kCut.size()) {
    const size_t room = err_len - 1 - kCut.size();
    const size_t head = room / 3;
    text = message.substr(0, head) + std::string(kCut) + message.substr(message.size() - (room - head));
  }
  const size_t n = std::min(text.size(), err_len - 1);
  text.copy(err, n);
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
    if (!PyBool_Check(v)) return fail(std::string(key) + ": True or False");
    const int truth = PyObject_IsTrue(v);
    *out = truth;
    return true;
  }
  bool integer(PyObject* v, const std::string& key, int64_t* out) {
    if (v == nullptr || !PyLong_Check(v)) return fail(key + ": an int");
    *out = PyLong_AsLongLong(v);
    if (PyErr_Occurred()) {
      PyErr_Clear();
      return fail(key + ": an int within int64");
    }
    return true;
  }
  // An int that a field of the ABI's int32_t holds.
  bool integer32(PyObject* v, const std::string& key, int32_t* out) {
    int64_t wide = 0;
    if (!integer(v, key, &wide)) return false;
    if (wide < INT32_MIN || wide > INT32_MAX) return fail(key + ": an int within int32");
    *out = static_cast<int32_t>(wide);
    return true;
  }
  // Every key of the dict among `known`, else a failure naming the first that is not (a typo would drop a field).
  bool only(std::initializer_list<const char*> known, const std::string& where) {
    PyObject *key = nullptr, *value = nullptr;
    Py_ssize_t at = 0;
    while (PyDict_Next(dict, &at, &key, &value)) {
      const std::string name = utf8(key);
      bool listed = false;
      for (const char* k : known) listed = listed || name == k;
      if (!listed) return fail(where + "unknown key '" + name + "'");
    }
    return true;
  }
  // A section: the dict under `key`, of the `known` keys, read by `read(inner)`; its errors come back as "key.<error>".
  // Whether the declaration has the key.
  template <typename Read>
  bool section(const char* key, std::initializer_list<const char*> known, Read&& read) {
    PyObject* v = get(key);
    if (v == nullptr) return false;
    if (!PyDict_Check(v)) {
      std::string list;
      for (const char* k : known) list += (list.empty() ? "" : ", ") + std::string(k);
      fail(std::string(key) + ": a dict {" + list + "}");
      return true;
    }
    Declaration inner{v, ""};
    inner.only(known, "");
    read(inner);
    if (!inner.error.empty()) fail(std::string(key) + "." + inner.error);
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
      const bool is_text = PyUnicode_Check(item);
      const std::string text = utf8(item);
      const int code = is_text ? find(std::string_view(text)) : -1;
      if (code < 0) {
        Py_DECREF(seq);
        return fail(std::string(key) + ": unknown name " + (is_text ? "'" + text + "'" : "(not a str)"));
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
    int32_t x = 0, y = 0;
    const bool ok = integer32(a, key, &x) && integer32(b, key, &y);
    *lo = x;
    *hi = y;
    Py_XDECREF(a);
    Py_XDECREF(b);
    return ok;
  }
};

// A row's code by its name in one of flashcheck's tables (kDTypes, kMaskNames), or -1; and back.
template <typename Table>
int code_in(const Table& table, std::string_view name) {
  for (const auto& row : table) {
    if (name == row.name) return row.c_code;
  }
  return -1;
}
template <typename Table>
const char* name_in(const Table& table, int32_t code) {
  for (const auto& row : table) {
    if (row.c_code == code) return row.name;
  }
  return "?";
}
int dtype_code(std::string_view name) { return code_in(flashcheck::kDTypes, name); }
int mask_code(std::string_view name) { return code_in(flashcheck::kMaskNames, name); }
int layout_code(std::string_view name) {
  return name == "bhsd" ? FC_SUBJECT_LAYOUT_BHSD : name == "bshd" ? FC_SUBJECT_LAYOUT_BSHD
                                                 : name == "strided" ? FC_SUBJECT_LAYOUT_STRIDED : -1;
}
int arithmetic_code(std::string_view name) {
  return name == "general-fp32"  ? FC_SUBJECT_ARITH_GENERAL_FP32
         : name == "tensor-core" ? FC_SUBJECT_ARITH_TENSOR_CORE
         : name == "split-tf32"  ? FC_SUBJECT_ARITH_SPLIT_TF32
         : name == "tensor-core-fp8" ? FC_SUBJECT_ARITH_TENSOR_CORE_FP8
         : name == "undeclared"  ? FC_SUBJECT_ARITH_UNDECLARED
                                 : -1;
}

int sequence_code(std::string_view name) {
  return name == "varlen"      ? FC_SUBJECT_SEQ_VARLEN
         : name == "seqused_k" ? FC_SUBJECT_SEQ_SEQUSED_K
         : name == "paged"     ? FC_SUBJECT_SEQ_PAGED
         : name == "splits"    ? FC_SUBJECT_SEQ_SPLITS
                               : -1;
}

// The declaration's "arithmetic" dict (absent: every dtype undeclared) into per-dtype class codes; false when it is
// not a dict of dtype names to class names.
bool read_arithmetic(Declaration& d, int32_t (&out)[3]) {
  PyObject* arith = d.get("arithmetic");
  if (arith == nullptr) return true;
  if (!PyDict_Check(arith)) return false;
  PyObject *key = nullptr, *value = nullptr;
  Py_ssize_t at = 0;
  while (PyDict_Next(arith, &at, &key, &value)) {
    const int dtype = PyUnicode_Check(key) ? dtype_code(utf8(key)) : -1;
    const int cls = PyUnicode_Check(value) ? arithmetic_code(utf8(value)) : -1;
    if (dtype < 0 || dtype >= 3 || cls < 0) return false;
    out[dtype] = cls;
  }
  return true;
}

bool read_declaration(PyObject* dict, Slot* s) {
  Declaration d{dict, ""};
  fc_subject_capabilities& c = s->subject.capabilities;
  d.only({"name", "memory", "dtypes", "masks", "layouts", "head_dim", "head_dims", "head_dim_v", "gqa", "lse", "softcap",
          "sink", "arithmetic", "key_tile", "limits", "sequences", "backward", "dropout", "fp8"},
         "");
  PyObject* name = d.get("name");
  if (name == nullptr || !PyUnicode_Check(name)) {
    s->error = "name: a str";
    return false;
  }
  s->name = utf8(name);
  PyObject* memory = d.get("memory");
  const std::string memory_text = memory == nullptr ? "device" : utf8(memory);
  if (memory_text != "host" && memory_text != "device") d.fail("memory: \"host\" or \"device\"");
  s->host = memory_text == "host";
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
      int32_t v = 0;
      if (d.integer32(PySequence_Fast_GET_ITEM(seq, i), "head_dims", &v)) s->head_dims.push_back(v);
    }
    Py_DECREF(seq);
    if (s->head_dims.empty()) d.fail("head_dims: a non-empty list of ints");
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
  if (!read_arithmetic(d, a.arithmetic)) {
    d.fail("arithmetic: {dtype: \"general-fp32\" | \"tensor-core\" | \"split-tf32\" | \"undeclared\"}");
  }
  if (PyObject* tile = d.get("key_tile")) d.integer32(tile, "key_tile", &a.key_tile);
  if (d.get("head_dim_v") != nullptr) {
    int64_t lo = 0, hi = 0;
    if (d.pair("head_dim_v", &lo, &hi)) {
      s->value_dims = {static_cast<int32_t>(lo), static_cast<int32_t>(hi)};
      s->has_value_dims = true;
    }
  }
  if (PyObject* limits = d.get("limits")) {
    const std::pair<const char*, int64_t*> fields[] = {
        {"seqlen_q_multiple", &s->limits.seqlen_q_multiple}, {"seqlen_k_multiple", &s->limits.seqlen_k_multiple},
        {"seqlen_q_min", &s->limits.seqlen_q_min},           {"seqlen_k_min", &s->limits.seqlen_k_min},
        {"seqlen_q_max", &s->limits.seqlen_q_max},           {"seqlen_k_max", &s->limits.seqlen_k_max}};
    if (!PyDict_Check(limits)) d.fail("limits: a dict of fc_subject_limits' fields");
    PyObject *key = nullptr, *value = nullptr;
    Py_ssize_t at = 0;
    while (PyDict_Check(limits) && PyDict_Next(limits, &at, &key, &value)) {
      const std::string name = utf8(key);
      int64_t* out = nullptr;
      for (const auto& [field, target] : fields) {
        if (name == field) out = target;
      }
      if (out == nullptr) {
        d.fail("limits.unknown key '" + name + "'");  // a typo would drop the limit
        break;
      }
      d.integer(value, "limits." + name, out);
    }
    s->has_limits = true;
  }
  s->has_sequences = d.section("sequences", {"features", "page_size_multiple", "max_splits"}, [&](Declaration& inner) {
    inner.names("features", &s->sequences.features, sequence_code, true);
    if (PyObject* m = inner.get("page_size_multiple")) inner.integer(m, "page_size_multiple", &s->sequences.page_size_multiple);
    if (PyObject* m = inner.get("max_splits")) inner.integer32(m, "max_splits", &s->sequences.max_splits);
  });
  s->has_backward = d.section("backward", {"function", "arithmetic", "sink", "sequences", "deterministic"},
                              [&](Declaration& inner) {
    PyObject* fn = inner.get("function");
    if (fn == nullptr || !PyUnicode_Check(fn)) inner.fail("function: the name of the module's backward callable");
    else s->backward_name = utf8(fn);
    if (!read_arithmetic(inner, s->backward.arithmetic)) inner.fail("arithmetic: {dtype: \"general-fp32\" | \"tensor-core\"}");
    inner.boolean("sink", &s->backward.sink, 0);
    inner.boolean("sequences", &s->backward.sequences, 0);
    inner.boolean("deterministic", &s->backward.deterministic, 0);
  });
  s->has_dropout = d.section("dropout", {"arithmetic", "mask_dump", "sequences", "backward"}, [&](Declaration& inner) {
    if (!read_arithmetic(inner, s->dropout.arithmetic)) inner.fail("arithmetic: {dtype: \"general-fp32\"}");
    inner.boolean("mask_dump", &s->dropout.mask_dump, 0);
    inner.boolean("sequences", &s->dropout.sequences, 0);
    inner.boolean("backward", &s->dropout_backward, 0);
  });
  s->has_fp8 = d.section("fp8", {"arithmetic", "descales", "key_tile", "key_tiles", "head_dim_multiple"}, [&](Declaration& inner) {
    PyObject* arith = inner.get("arithmetic");
    s->fp8.arithmetic = arith != nullptr && PyUnicode_Check(arith) ? arithmetic_code(utf8(arith)) : -1;
    if (s->fp8.arithmetic != FC_SUBJECT_ARITH_TENSOR_CORE_FP8) inner.fail("arithmetic: \"tensor-core-fp8\"");
    inner.boolean("descales", &s->fp8.descales, 0);
    if (PyObject* tile = inner.get("key_tile")) inner.integer32(tile, "key_tile", &s->fp8.key_tile);
    // head_dim_multiple: the fp8 path's head dims (fc_subject_fp8_head_dims_v1; the loader checks the value).
    if (PyObject* multiple = inner.get("head_dim_multiple")) {
      inner.integer32(multiple, "head_dim_multiple", &s->fp8_head_dims.multiple);
      s->has_fp8_head_dims = true;
    }
    // key_tiles: {max_head_dim: key_tile, ...}, in increasing max_head_dim (the loader checks the entries).
    if (PyObject* tiles = inner.get("key_tiles")) {
      PyObject* items = PyDict_Check(tiles) ? PyDict_Items(tiles) : nullptr;
      if (items == nullptr || PyList_Size(items) > FC_SUBJECT_FP8_KEY_TILES || PyList_Sort(items) != 0) {
        PyErr_Clear();
        inner.fail("key_tiles: a dict {max_head_dim: key_tile} of at most " +
                   std::to_string(FC_SUBJECT_FP8_KEY_TILES) + " ints");
      } else {
        for (Py_ssize_t i = 0; i < PyList_Size(items); ++i) {
          PyObject* pair = PyList_GetItem(items, i);
          fc_subject_fp8_key_tile& t = s->fp8.key_tiles[i];
          inner.integer32(PyTuple_GetItem(pair, 0), "key_tiles (a max_head_dim)", &t.max_head_dim);
          inner.integer32(PyTuple_GetItem(pair, 1), "key_tiles (a key_tile)", &t.key_tile);
        }
        s->fp8.key_tiles_count = static_cast<int32_t>(PyList_Size(items));
      }
      Py_XDECREF(items);
    }
  });
  s->error = d.error;
  return d.error.empty();
}

// ---- The call -------------------------------------------------------------------------------------------------

// An element type as the buffer protocol and __cuda_array_interface__ spell it.
struct Element {
  const char* format;
  const char* typestr;
  Py_ssize_t size;
};
constexpr Element kF32{"f", "<f4", 4}, kI32{"i", "<i4", 4}, kU8{"B", "|u1", 1};
constexpr Element kBf16Bits{"H", "<u2", 2};
// Q's, K's and V's element (e4m3's bytes for f8e4m3); O's is bf16 there (views_of's `out`).
Element element_of(int32_t dtype) {
  return dtype == FC_SUBJECT_DTYPE_F32    ? kF32
         : dtype == FC_SUBJECT_DTYPE_F16  ? Element{"e", "<f2", 2}
         : dtype == FC_SUBJECT_DTYPE_F8E4M3 ? kU8
                                            : kBf16Bits;
}

// One tensor's view: its shape and byte strides, kept alive for the call.
struct View {
  const char* name = "";
  void* data = nullptr;
  bool writable = false;
  int ndim = 0;
  Py_ssize_t shape[4] = {}, strides[4] = {};
  Element element = kF32;
  Py_buffer buffer{};
  PyObject* object = nullptr;  // the memoryview or the interface object (owned)
};

void describe(View* v, const char* name, const void* data, bool writable, Element element,
              std::initializer_list<int64_t> shape, std::initializer_list<int64_t> element_strides) {
  v->name = name;
  v->data = const_cast<void*>(data);
  v->writable = writable;
  v->element = element;
  v->ndim = static_cast<int>(shape.size());
  int i = 0;
  for (int64_t n : shape) v->shape[i++] = static_cast<Py_ssize_t>(n);
  i = 0;
  for (int64_t st : element_strides) v->strides[i++] = static_cast<Py_ssize_t>(st) * element.size;
}

PyObject* tuple_of(const Py_ssize_t* values, int n) {
  PyObject* t = PyTuple_New(n);
  for (int i = 0; i < n; ++i) PyTuple_SET_ITEM(t, i, PyLong_FromSsize_t(values[i]));
  return t;
}

// The Python object for a view (a new reference): None for a null pointer, a memoryview (host) or an object
// carrying __cuda_array_interface__ (device).
PyObject* make_object(View* v, bool host, void* stream, PyObject* namespace_type) {
  if (v->data == nullptr) Py_RETURN_NONE;
  if (host) {
    Py_ssize_t elements = 1;
    for (int i = 0; i < v->ndim; ++i) elements *= v->shape[i];
    v->buffer.buf = v->data;
    v->buffer.obj = nullptr;
    v->buffer.len = elements * v->element.size;
    v->buffer.itemsize = v->element.size;
    v->buffer.readonly = v->writable ? 0 : 1;
    v->buffer.ndim = v->ndim;
    v->buffer.format = const_cast<char*>(v->element.format);
    v->buffer.shape = v->shape;
    v->buffer.strides = v->strides;
    v->buffer.suboffsets = nullptr;
    v->object = PyMemoryView_FromBuffer(&v->buffer);
  } else {
    // Every device view is marked writable: torch's consumer of __cuda_array_interface__ refuses a read-only one. The
    // harness still holds inputs to their bytes (compared after the call), so a subject that writes one fails.
    PyObject* interface = Py_BuildValue(
        "{s:N,s:s,s:(N,O),s:N,s:i,s:N}", "shape", tuple_of(v->shape, v->ndim), "typestr", v->element.typestr, "data",
        PyLong_FromVoidPtr(v->data), Py_False, "strides", tuple_of(v->strides, v->ndim),
        "version", 3, "stream", stream != nullptr ? PyLong_FromVoidPtr(stream) : PyLong_FromLong(1));
    if (interface == nullptr) return nullptr;
    PyObject* kwargs = Py_BuildValue("{s:N}", "__cuda_array_interface__", interface);
    PyObject* empty = PyTuple_New(0);
    v->object = kwargs != nullptr ? PyObject_Call(namespace_type, empty, kwargs) : nullptr;
    Py_XDECREF(empty);
    Py_XDECREF(kwargs);
  }
  Py_XINCREF(v->object);  // one reference for the dict, one kept to release the view after the call
  return v->object;
}

// What a call carries besides the problem and the forward's buffers, each null where the call has none: the
// sequences, the backward's strides and buffers, the dropout's arguments, the fp8 path's descales.
struct CallArgs {
  const fc_subject_sequence_args* seq = nullptr;
  const fc_subject_backward_strides* bs = nullptr;
  const fc_subject_backward_buffers* bb = nullptr;
  const fc_subject_dropout_args* drop = nullptr;
  const fc_subject_fp8_args* fp8 = nullptr;
};

// The views of one call: the forward's tensors in the layout the problem's sequences give them (attention.h), the
// index arrays, the dropout's mask dump, the fp8 path's descales, and for a backward call dO and the gradients.
std::vector<View> views_of(const fc_subject_problem* p, const fc_subject_buffers* b, const CallArgs& call) {
  const fc_subject_sequence_args* seq = call.seq;
  const fc_subject_backward_strides* bs = call.bs;
  const fc_subject_backward_buffers* bb = call.bb;
  std::vector<View> views(20);
  size_t n = 0;
  const Element e = element_of(p->dtype);
  const Element out = p->dtype == FC_SUBJECT_DTYPE_F8E4M3 ? kBf16Bits : e;  // fp8's O is bf16
  const int64_t dv = p->head_dim_v;
  const bool packed_q = seq != nullptr && seq->cu_seqlens_q != nullptr;
  const bool paged = seq != nullptr && seq->page_table != nullptr;
  const bool packed_k = seq != nullptr && seq->cu_seqlens_k != nullptr;
  const auto rows = [&](const char* name, const void* data, bool writable, int64_t cols, const fc_subject_strides& st,
                        const Element& el) {
    if (packed_q) {
      describe(&views[n++], name, data, writable, el, {seq->total_q, p->heads_q, cols}, {st.row, st.head, 1});
    } else {
      describe(&views[n++], name, data, writable, el, {p->batch, p->heads_q, p->seqlen_q, cols}, {st.batch, st.head, st.row, 1});
    }
  };
  const auto keys = [&](const char* name, const void* data, bool writable, int64_t cols, const fc_subject_strides& st) {
    if (paged) {
      describe(&views[n++], name, data, writable, e, {seq->num_pages, seq->page_size, p->heads_kv, cols},
               {st.batch, st.row, st.head, 1});
    } else if (packed_k) {
      describe(&views[n++], name, data, writable, e, {seq->total_k, p->heads_kv, cols}, {st.row, st.head, 1});
    } else {
      describe(&views[n++], name, data, writable, e, {p->batch, p->heads_kv, p->seqlen_k, cols}, {st.batch, st.head, st.row, 1});
    }
  };
  const bool backward = bb != nullptr;
  rows("q", b->q, false, p->head_dim, p->q_stride, e);
  keys("k", b->k, false, p->head_dim, p->k_stride);
  keys("v", b->v, false, dv, p->v_stride);
  rows("o", backward ? bb->o : b->o, !backward, dv, p->o_stride, out);
  const float* lse = backward ? bb->lse : b->lse;
  if (packed_q) {
    describe(&views[n++], "lse", lse, !backward, kF32, {p->heads_q, seq->total_q}, {seq->total_q, 1});
  } else {
    describe(&views[n++], "lse", lse, !backward, kF32, {p->batch, p->heads_q, p->seqlen_q},
             {p->heads_q * p->seqlen_q, p->seqlen_q, 1});
  }
  describe(&views[n++], "sink", b->sink, false, kF32, {p->heads_q}, {1});
  // The index arrays: None where absent (every one for a dense case).
  const fc_subject_sequence_args none{};
  const fc_subject_sequence_args& a = seq != nullptr ? *seq : none;
  describe(&views[n++], "cu_seqlens_q", a.cu_seqlens_q, false, kI32, {p->batch + 1}, {1});
  describe(&views[n++], "cu_seqlens_k", a.cu_seqlens_k, false, kI32, {p->batch + 1}, {1});
  describe(&views[n++], "seqused_k", a.seqused_k, false, kI32, {p->batch}, {1});
  describe(&views[n++], "page_table", a.page_table, false, kI32, {p->batch, a.max_pages_per_seq}, {a.max_pages_per_seq, 1});
  // The mask dump, [batch, heads_q, seqlen_q, seqlen_k] bytes: None unless the harness asks for it.
  describe(&views[n++], "dropout_mask", call.drop != nullptr ? call.drop->mask_out : nullptr, true, kU8,
           {p->batch, p->heads_q, p->seqlen_q, p->seqlen_k},
           {p->heads_q * p->seqlen_q * p->seqlen_k, p->seqlen_q * p->seqlen_k, p->seqlen_k, 1});
  // The descales, [batch, heads_kv] fp32: None without them (every call but an fp8 one with descales).
  const fc_subject_fp8_args no_descales{};
  const fc_subject_fp8_args& f = call.fp8 != nullptr ? *call.fp8 : no_descales;
  for (const auto& [name, data] : {std::pair{"descale_q", f.descale_q}, std::pair{"descale_k", f.descale_k},
                                   std::pair{"descale_v", f.descale_v}}) {
    describe(&views[n++], name, data, false, kF32, {p->batch, p->heads_kv}, {p->heads_kv, 1});
  }
  if (backward) {
    rows("d_o", bb->d_o, false, dv, bs->d_o, out);
    rows("dq", bb->dq, true, p->head_dim, bs->dq, e);
    keys("dk", bb->dk, true, p->head_dim, bs->dk);
    keys("dv", bb->dv, true, dv, bs->dv);
    describe(&views[n++], "dsink", bb->dsink, true, kF32, {p->heads_q}, {1});
  }
  views.resize(n);
  return views;
}

PyObject* problem_dict(const fc_subject_problem* p, const fc_subject_sequence_args* seq,
                       const fc_subject_dropout_args* drop, void* stream) {
  PyObject* d = Py_BuildValue(
      "{s:s,s:s,s:L,s:L,s:L,s:L,s:L,s:L,s:L,s:d,s:L,s:L,s:d,s:N}", "dtype", name_in(flashcheck::kDTypes, p->dtype),
      "mask", name_in(flashcheck::kMaskNames, p->mask), "batch", static_cast<long long>(p->batch), "heads_q",
      static_cast<long long>(p->heads_q),
      "heads_kv", static_cast<long long>(p->heads_kv), "seqlen_q", static_cast<long long>(p->seqlen_q), "seqlen_k",
      static_cast<long long>(p->seqlen_k), "head_dim", static_cast<long long>(p->head_dim), "head_dim_v",
      static_cast<long long>(p->head_dim_v), "softmax_scale", static_cast<double>(p->softmax_scale), "window_left",
      static_cast<long long>(p->window_left), "window_right", static_cast<long long>(p->window_right), "softcap",
      static_cast<double>(p->softcap), "stream", PyLong_FromVoidPtr(stream));
  if (d == nullptr) return d;
  const fc_subject_sequence_args dense{0, 0, nullptr, 0, nullptr, nullptr, 0, 0, 0, 1};
  const fc_subject_sequence_args& a = seq != nullptr ? *seq : dense;  // a dense case: no sequences, one split
  const std::pair<const char*, int64_t> fields[] = {{"total_q", a.total_q},     {"total_k", a.total_k},
                                                    {"page_size", a.page_size}, {"num_pages", a.num_pages},
                                                    {"max_pages_per_seq", a.max_pages_per_seq},
                                                    {"num_splits", a.num_splits}};
  for (const auto& [key, value] : fields) {
    PyObject* x = PyLong_FromLongLong(value);
    PyDict_SetItemString(d, key, x);
    Py_XDECREF(x);
  }
  // The dropout (0, 0, 0 without one): p, and the Philox key and first stream as Python ints (uint64).
  const fc_subject_dropout_args no_dropout{0.0f, 0, 0, nullptr};
  const fc_subject_dropout_args& dr = drop != nullptr ? *drop : no_dropout;
  PyObject* dp = PyFloat_FromDouble(static_cast<double>(dr.p));
  PyObject* seed = PyLong_FromUnsignedLongLong(dr.seed);
  PyObject* offset = PyLong_FromUnsignedLongLong(dr.offset);
  PyDict_SetItemString(d, "dropout_p", dp);
  PyDict_SetItemString(d, "dropout_seed", seed);
  PyDict_SetItemString(d, "dropout_offset", offset);
  Py_XDECREF(dp);
  Py_XDECREF(seed);
  Py_XDECREF(offset);
  return d;
}

// One call of `function` (a slot's forward or backward) on the harness's buffers, its outcome as a return code.
int call_python(const Slot& slot, PyObject* function, const fc_subject_problem* p, const fc_subject_buffers* b,
                const CallArgs& call, void* stream, char* err, size_t err_len) {
  const PyGILState_STATE gil = PyGILState_Ensure();
  int code = FC_SUBJECT_OK;
  std::vector<View> views = views_of(p, b, call);
  PyObject* namespace_type = g_namespace_type;
  PyObject* buffers = PyDict_New();
  PyObject* problem = nullptr;
  bool built = namespace_type != nullptr && buffers != nullptr;
  for (View& view : views) {
    if (!built) break;
    PyObject* object = make_object(&view, slot.host, stream, namespace_type);
    built = object != nullptr && PyDict_SetItemString(buffers, view.name, object) == 0;
    Py_XDECREF(object);
  }
  if (built) built = (problem = problem_dict(p, call.seq, call.drop, stream)) != nullptr;
  if (!built) {
    copy_message("building the call's arguments: " + take_error(), err, err_len);
    code = FC_SUBJECT_ERROR;
  } else {
    PyObject* result = PyObject_CallFunctionObjArgs(function, problem, buffers, nullptr);
    if (result == nullptr) {
      code = code_of_exception();
      copy_message(take_error(), err, err_len);
    } else if (result != Py_None) {
      code = FC_SUBJECT_ERROR;
      copy_message("the subject returned something other than None (it writes its outputs in place)", err, err_len);
    }
    Py_XDECREF(result);
  }
  // The views die with the call. One the subject still holds (a reference, or an export of a host view: an array or
  // tensor made from it) would alias guarded memory after the harness frees it: the call fails naming the buffer.
  Py_XDECREF(problem);
  Py_XDECREF(buffers);
  std::string kept;
  for (View& view : views) {
    if (view.object == nullptr) continue;
    bool held = Py_REFCNT(view.object) > 1;
    if (slot.host) {
      PyObject* released = PyObject_CallMethod(view.object, "release", nullptr);
      if (released == nullptr) {
        PyErr_Clear();
        held = true;
      }
      Py_XDECREF(released);
    }
    if (held && kept.empty()) kept = view.name;
    Py_XDECREF(view.object);
  }
  if (!kept.empty() && code == FC_SUBJECT_OK) {
    code = FC_SUBJECT_ERROR;
    copy_message("the subject kept a reference to " + kept + " past the call (the views of the harness's buffers live "
                 "for the call only)", err, err_len);
  }
  PyGILState_Release(gil);
  return code;
}

template <int N>
int forward_slot(const fc_subject_problem* p, const fc_subject_buffers* b, void* stream, char* err, size_t err_len) {
  const Slot& s = *g_slots[N];
  return call_python(s, s.function, p, b, {}, stream, err, err_len);
}
template <int N>
int sequences_slot(const fc_subject_problem* p, const fc_subject_sequence_args* seq, const fc_subject_buffers* b,
                   void* stream, char* err, size_t err_len) {
  const Slot& s = *g_slots[N];
  return call_python(s, s.function, p, b, {.seq = seq}, stream, err, err_len);
}
template <int N>
int backward_slot(const fc_subject_problem* p, const fc_subject_sequence_args* seq, const fc_subject_backward_strides* bs,
                  const fc_subject_buffers* b, const fc_subject_backward_buffers* bb, void* stream, char* err,
                  size_t err_len) {
  const Slot& s = *g_slots[N];
  return call_python(s, s.backward_function, p, b, {.seq = seq, .bs = bs, .bb = bb}, stream, err, err_len);
}
// Under a dropout: the same callables, the problem carrying dropout_p, _seed and _offset, the buffers the mask dump.
template <int N>
int forward_dropout_slot(const fc_subject_problem* p, const fc_subject_sequence_args* seq,
                         const fc_subject_dropout_args* drop, const fc_subject_buffers* b, void* stream, char* err,
                         size_t err_len) {
  const Slot& s = *g_slots[N];
  return call_python(s, s.function, p, b, {.seq = seq, .drop = drop}, stream, err, err_len);
}
template <int N>
int backward_dropout_slot(const fc_subject_problem* p, const fc_subject_sequence_args* seq,
                          const fc_subject_dropout_args* drop, const fc_subject_backward_strides* bs,
                          const fc_subject_buffers* b, const fc_subject_backward_buffers* bb, void* stream, char* err,
                          size_t err_len) {
  const Slot& s = *g_slots[N];
  return call_python(s, s.backward_function, p, b, {.seq = seq, .bs = bs, .bb = bb, .drop = drop}, stream, err, err_len);
}
// On e4m3 inputs: the forward callable, the problem's dtype "f8e4m3", the buffers the descales.
template <int N>
int forward_fp8_slot(const fc_subject_problem* p, const fc_subject_fp8_args* fp8, const fc_subject_buffers* b,
                     void* stream, char* err, size_t err_len) {
  const Slot& s = *g_slots[N];
  return call_python(s, s.function, p, b, {.fp8 = fp8}, stream, err, err_len);
}
struct Trampolines {
  decltype(&forward_slot<0>) forward;
  decltype(&sequences_slot<0>) sequences;
  decltype(&backward_slot<0>) backward;
  decltype(&forward_dropout_slot<0>) forward_dropout;
  decltype(&backward_dropout_slot<0>) backward_dropout;
  decltype(&forward_fp8_slot<0>) forward_fp8;
};
template <int... N>
constexpr auto make_trampolines(std::integer_sequence<int, N...>) {
  return std::array<Trampolines, sizeof...(N)>{Trampolines{&forward_slot<N>, &sequences_slot<N>, &backward_slot<N>,
                                                           &forward_dropout_slot<N>, &backward_dropout_slot<N>,
                                                           &forward_fp8_slot<N>}...};
}
constexpr auto kTrampolines = make_trampolines(std::make_integer_sequence<int, kSlots>{});

// CPython, started once; the main thread lets go of the GIL so that any thread may call in. Returns why it could not
// start ("" once it runs): a broken installation is the subject's load failure, not a fatal error that exits the
// process (as Py_InitializeEx's would, with status 1, the tools' FAIL).
std::string start_python() {
  if (Py_IsInitialized()) return "";
  // Extension modules (numpy's, torch's) take the interpreter's symbols from the global scope, where a subject
  // library loaded RTLD_LOCAL does not put them: promote libpython.
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&Py_InitializeEx), &info) != 0 && info.dli_fname != nullptr) {
    dlopen(info.dli_fname, RTLD_NOW | RTLD_GLOBAL | RTLD_NOLOAD);
  }
  // Started as the interpreter it was built against (FLASHCHECK_PYTHON overrides): its getpath finds a virtual
  // environment's pyvenv.cfg, so that environment's site-packages are on sys.path as they are for that python3.
  PyConfig config;
  PyConfig_InitPythonConfig(&config);
  config.install_signal_handlers = 0;
  const char* executable = std::getenv("FLASHCHECK_PYTHON");
#ifdef FLASHCHECK_PYTHON_EXECUTABLE
  if (executable == nullptr || *executable == '\0') executable = FLASHCHECK_PYTHON_EXECUTABLE;
#endif
  if (executable != nullptr && *executable != '\0') {
    PyStatus status = PyConfig_SetBytesString(&config, &config.program_name, executable);
    if (!PyStatus_Exception(status)) status = PyConfig_SetBytesString(&config, &config.executable, executable);
    if (PyStatus_Exception(status)) {  // start as a plain embedding instead
      PyConfig_Clear(&config);
      PyConfig_InitPythonConfig(&config);
      config.install_signal_handlers = 0;
    }
  }
  PyStatus started = Py_InitializeFromConfig(&config);
  PyConfig_Clear(&config);
  if (PyStatus_Exception(started) && executable != nullptr && *executable != '\0') {  // a plain embedding instead
    PyConfig_InitPythonConfig(&config);
    config.install_signal_handlers = 0;
    started = Py_InitializeFromConfig(&config);
    PyConfig_Clear(&config);
  }
  if (PyStatus_Exception(started)) {
    return std::string("CPython does not start: ") + (started.func != nullptr ? started.func : "") +
           (started.func != nullptr ? ": " : "") + (started.err_msg != nullptr ? started.err_msg : "unknown error") +
           " (check PYTHONHOME, PYTHONPATH and FLASHCHECK_PYTHON)";
  }
  PyRun_SimpleString("import os, sys\nsys.path.insert(0, os.getcwd())\n");
  if (PyObject* types = PyImport_ImportModule("types")) {
    g_namespace_type = PyObject_GetAttrString(types, "SimpleNamespace");  // kept for the process's life
    Py_DECREF(types);
  }
  PyErr_Clear();
  PyEval_SaveThread();
  return "";
}

fc_subject_python answer_of(const Slot& s) {
  return {&s.subject, s.has_limits ? &s.limits : nullptr, s.has_value_dims ? &s.value_dims : nullptr, nullptr,
          s.has_sequences ? &s.sequences : nullptr, s.has_backward ? &s.backward : nullptr,
          s.has_dropout ? &s.dropout : nullptr, s.has_fp8 ? &s.fp8 : nullptr,
          s.has_fp8_head_dims ? &s.fp8_head_dims : nullptr};
}

// The answer for a spec that cannot be served (the slot is freed; the text lives until the next failure).
fc_subject_python failure(int slot, std::string why) {
  thread_local std::string last;
  last = std::move(why);
  g_slots[slot].reset();
  return {nullptr, nullptr, nullptr, last.c_str(), nullptr, nullptr, nullptr, nullptr, nullptr};
}

}  // namespace

fc_subject_python fc_subject_python_v4(const char* spec) {
  std::lock_guard<std::mutex> lock(g_mutex);
  thread_local std::string no_slot;
  int free_slot = -1;
  for (int i = 0; i < kSlots; ++i) {
    if (g_slots[i] && g_slots[i]->spec == spec) return answer_of(*g_slots[i]);
    if (!g_slots[i] && free_slot < 0) free_slot = i;
  }
  if (free_slot < 0) {
    no_slot = "at most " + std::to_string(kSlots) + " Python subjects per process";
    return {nullptr, nullptr, nullptr, no_slot.c_str(), nullptr, nullptr, nullptr, nullptr, nullptr};
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
  if (std::string why = start_python(); !why.empty()) return failure(free_slot, std::move(why));
  const PyGILState_STATE gil = PyGILState_Ensure();
  fc_subject_python out{nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr};
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
    PyObject* backward = s->has_backward ? PyObject_GetAttrString(module, s->backward_name.c_str()) : nullptr;
    if (s->has_backward && (backward == nullptr || !PyCallable_Check(backward))) {
      if (backward == nullptr) PyErr_Clear();
      Py_XDECREF(backward);
      out = failure(free_slot, module_name + "." + function_name + ": flashcheck declaration: backward.function: " +
                                   module_name + " has no callable " + s->backward_name);
    } else {
      s->function = function;
      Py_INCREF(function);
      s->backward_function = backward;  // the reference GetAttr gave, kept
      s->subject.abi_version = FC_SUBJECT_ABI_VERSION;
      s->subject.name = s->name.c_str();
      s->subject.forward = kTrampolines[free_slot].forward;
      s->sequences.forward_sequences = kTrampolines[free_slot].sequences;
      s->backward.backward = kTrampolines[free_slot].backward;
      s->dropout.forward_dropout = kTrampolines[free_slot].forward_dropout;
      // A dropout backward without a backward callable is the loader's to refuse (it names the field).
      s->dropout.backward_dropout = s->dropout_backward ? kTrampolines[free_slot].backward_dropout : nullptr;
      s->fp8.forward_fp8 = kTrampolines[free_slot].forward_fp8;
      out = answer_of(*s);
    }
  }
  Py_XDECREF(declaration);
  Py_XDECREF(function);
  Py_XDECREF(module);
  PyErr_Clear();  // nothing of a refused spec stays set for the next call into Python
  PyGILState_Release(gil);
  return out;
}
