/* The README's C example: parameters for a bf16 causal problem, validated before any buffer exists (an
 * impossible head_dim and the missing buffers named), and the forward call (device pointers; without a device, or
 * in a build without CUDA, it is not called). Exit status 0 when every call answered as expected. */
#include <stdio.h>

#include "flashcheck/attention_c.h"

int main(void) {
  char msg[256];
  fc_params p;
  if (fc_make_params(FC_DTYPE_BF16, 2, 8, 2, 129, 257, 128, FC_MASK_CAUSAL_BOTTOM_RIGHT, FC_LAYOUT_BHSD, &p, msg,
                     sizeof msg) != FC_OK) {
    fprintf(stderr, "fc_make_params: %s\n", msg);
    return 1;
  }
  /* An impossible shape is refused by fc_make_params already, naming the field. */
  fc_params bad;
  if (fc_make_params(FC_DTYPE_BF16, 2, 8, 2, 129, 257, 257, FC_MASK_NONE, FC_LAYOUT_BHSD, &bad, msg, sizeof msg) !=
      FC_ERR_INVALID_ARGUMENT) {
    fprintf(stderr, "head_dim 257 was accepted\n");
    return 1;
  }
  printf("head_dim 257: %s\n", msg);
  /* Before the buffers exist, fc_can_implement names the first missing pointer. */
  if (fc_can_implement(&p, msg, sizeof msg) != FC_ERR_INVALID_ARGUMENT) {
    fprintf(stderr, "params without buffers were accepted\n");
    return 1;
  }
  printf("without buffers: %s\n", msg);
  /* p.q, p.k, p.v, p.o, p.lse = device pointers; then: */
  if (!fc_device_available()) {
    printf("no CUDA device: fc_forward would return FC_ERR_NO_DEVICE (%s)\n", fc_version());
    return 0;
  }
  const fc_status st = fc_forward(&p, NULL, msg, sizeof msg);
  printf("fc_forward without buffers: %d (%s)\n", st, msg);
  return st == FC_ERR_INVALID_ARGUMENT ? 0 : 1;
}
