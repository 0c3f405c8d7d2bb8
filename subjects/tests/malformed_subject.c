/* Malformed subjects for the loader's tests (subject_test): each variant breaks one rule of flashcheck/subject.h.
 *   MALFORMED_NO_ENTRY       exports no fc_subject_v1
 *   MALFORMED_VERSION        abi_version 99
 *   MALFORMED_HEAD_DIM       head_dim_min > head_dim_max
 *   MALFORMED_ARITHMETIC     declares the tensor-core class with P kept in fp32
 *   MALFORMED_SEQUENCES      declares paged K/V without seqused_k (fc_subject_sequences_v1)
 *   MALFORMED_BACKWARD       declares a backward class for fp32, which its capabilities leave out (fc_subject_backward_v1)
 *   MALFORMED_DROPOUT        declares a dropout in the tensor-core class (fc_subject_dropout_v1: general-fp32 only)
 *   MALFORMED_DROPOUT_BACKWARD  declares a dropout backward without a backward pass
 *   MALFORMED_FP8            declares an fp8 path in the tensor-core class (fc_subject_fp8_v1: tensor-core-fp8 only)
 *   MALFORMED_FP8_KEY_TILES  declares fp8 key tiles per head dim out of order (max_head_dim 128, then 64)
 *   MALFORMED_FP8_HEAD_DIMS  declares fp8 head dims a multiple of 256 where the capabilities take 1..128 */
#include "flashcheck/subject.h"

static int forward(const fc_subject_problem* problem, const fc_subject_buffers* buffers, void* stream, char* err,
                   size_t err_len) {
  (void)problem, (void)buffers, (void)stream, (void)err, (void)err_len;
  return FC_SUBJECT_ERROR;
}

#ifndef MALFORMED_NO_ENTRY
static fc_subject subject = {FC_SUBJECT_ABI_VERSION, "malformed",
                             {FC_SUBJECT_BIT(FC_SUBJECT_DTYPE_F16), 1, 128, 0, 0, 1u, FC_SUBJECT_BIT(FC_SUBJECT_LAYOUT_BHSD), 0, 1, 0, 0,
                              FC_SUBJECT_MEMORY_HOST, 0},
                             {{0, 0, 0}, {0, 0, 0}, {0, 0, 0}, {0, 0, 0}, 0},
                             forward};

FC_SUBJECT_EXPORT const fc_subject* fc_subject_v1(void) {
#if defined(MALFORMED_VERSION)
  subject.abi_version = 99;
#elif defined(MALFORMED_HEAD_DIM)
  subject.capabilities.head_dim_min = 64;
  subject.capabilities.head_dim_max = 32;
#elif defined(MALFORMED_ARITHMETIC)
  subject.arithmetic.arithmetic[FC_SUBJECT_DTYPE_F16] = FC_SUBJECT_ARITH_TENSOR_CORE;
  subject.arithmetic.p_rounding[FC_SUBJECT_DTYPE_F16] = FC_SUBJECT_FMT_FP32;
#endif
  return &subject;
}
#else
FC_SUBJECT_EXPORT int not_a_subject(void) { return forward(0, 0, 0, 0, 0); }
#endif

#ifdef MALFORMED_SEQUENCES
static int forward_sequences(const fc_subject_problem* problem, const fc_subject_sequence_args* sequences,
                             const fc_subject_buffers* buffers, void* stream, char* err, size_t err_len) {
  (void)sequences;
  return forward(problem, buffers, stream, err, err_len);
}
static const fc_subject_sequences sequences = {FC_SUBJECT_BIT(FC_SUBJECT_SEQ_VARLEN) | FC_SUBJECT_BIT(FC_SUBJECT_SEQ_PAGED),
                                               0, 0, forward_sequences};
FC_SUBJECT_EXPORT const fc_subject_sequences* fc_subject_sequences_v1(void) { return &sequences; }
#endif

#ifdef MALFORMED_BACKWARD
static int backward(const fc_subject_problem* problem, const fc_subject_sequence_args* sequences,
                    const fc_subject_backward_strides* strides, const fc_subject_buffers* forward_buffers,
                    const fc_subject_backward_buffers* buffers, void* stream, char* err, size_t err_len) {
  (void)sequences, (void)strides, (void)buffers;
  return forward(problem, forward_buffers, stream, err, err_len);
}
static const fc_subject_backward backward_pass = {
    {FC_SUBJECT_ARITH_GENERAL_FP32, FC_SUBJECT_ARITH_GENERAL_FP32, FC_SUBJECT_ARITH_UNDECLARED}, 0, 0, 1, backward};
FC_SUBJECT_EXPORT const fc_subject_backward* fc_subject_backward_v1(void) { return &backward_pass; }
#endif

#if defined(MALFORMED_DROPOUT) || defined(MALFORMED_DROPOUT_BACKWARD)
static int forward_dropout(const fc_subject_problem* problem, const fc_subject_sequence_args* sequences,
                           const fc_subject_dropout_args* dropout, const fc_subject_buffers* buffers, void* stream,
                           char* err, size_t err_len) {
  (void)sequences, (void)dropout;
  return forward(problem, buffers, stream, err, err_len);
}
#ifdef MALFORMED_DROPOUT
static const fc_subject_dropout dropout_rule = {
    {FC_SUBJECT_ARITH_UNDECLARED, FC_SUBJECT_ARITH_TENSOR_CORE, FC_SUBJECT_ARITH_UNDECLARED}, 0, 0, forward_dropout, 0};
#else
static int backward_dropout(const fc_subject_problem* problem, const fc_subject_sequence_args* sequences,
                            const fc_subject_dropout_args* dropout, const fc_subject_backward_strides* strides,
                            const fc_subject_buffers* forward_buffers, const fc_subject_backward_buffers* buffers,
                            void* stream, char* err, size_t err_len) {
  (void)sequences, (void)dropout, (void)strides, (void)buffers;
  return forward(problem, forward_buffers, stream, err, err_len);
}
static const fc_subject_dropout dropout_rule = {
    {FC_SUBJECT_ARITH_UNDECLARED, FC_SUBJECT_ARITH_GENERAL_FP32, FC_SUBJECT_ARITH_UNDECLARED}, 0, 0, forward_dropout,
    backward_dropout};
#endif
FC_SUBJECT_EXPORT const fc_subject_dropout* fc_subject_dropout_v1(void) { return &dropout_rule; }
#endif

#if defined(MALFORMED_FP8) || defined(MALFORMED_FP8_KEY_TILES) || defined(MALFORMED_FP8_HEAD_DIMS)
static int forward_fp8(const fc_subject_problem* problem, const fc_subject_fp8_args* fp8, const fc_subject_buffers* buffers,
                       void* stream, char* err, size_t err_len) {
  (void)fp8;
  return forward(problem, buffers, stream, err, err_len);
}
#if defined(MALFORMED_FP8)
static const fc_subject_fp8 fp8_rule = {FC_SUBJECT_ARITH_TENSOR_CORE, 1, 128, forward_fp8};
#elif defined(MALFORMED_FP8_KEY_TILES)
static const fc_subject_fp8 fp8_rule = {FC_SUBJECT_ARITH_TENSOR_CORE_FP8, 1, 128, forward_fp8, 2, {{128, 128}, {64, 160}}};
#else
static const fc_subject_fp8 fp8_rule = {FC_SUBJECT_ARITH_TENSOR_CORE_FP8, 1, 128, forward_fp8};
static const fc_subject_fp8_head_dims fp8_head_dims = {256};
FC_SUBJECT_EXPORT const fc_subject_fp8_head_dims* fc_subject_fp8_head_dims_v1(void) { return &fp8_head_dims; }
#endif
FC_SUBJECT_EXPORT const fc_subject_fp8* fc_subject_fp8_v1(void) { return &fp8_rule; }
#endif
