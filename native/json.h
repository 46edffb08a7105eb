/* A small streaming JSON writer: the envelope is the probe's only output, so
 * it must always be valid JSON whatever the strings in argv or uname hold. */
#ifndef QC_JSON_H
#define QC_JSON_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#define JSON_MAX_DEPTH 32

typedef struct {
    FILE *out;
    int depth;
    bool has_items[JSON_MAX_DEPTH];
    bool after_key;
} json_t;

void json_init(json_t *j, FILE *out);
void json_obj_begin(json_t *j);
void json_obj_end(json_t *j);
void json_arr_begin(json_t *j);
void json_arr_end(json_t *j);
void json_key(json_t *j, const char *key);
void json_str(json_t *j, const char *s);
void json_u64(json_t *j, uint64_t v);
void json_i64(json_t *j, int64_t v);
void json_f64(json_t *j, double v); /* NaN and infinities become null */
void json_bool(json_t *j, bool v);
void json_null(json_t *j);
void json_raw(json_t *j, const char *text); /* an already valid JSON value */

void json_kv_str(json_t *j, const char *key, const char *s);
void json_kv_u64(json_t *j, const char *key, uint64_t v);
void json_kv_i64(json_t *j, const char *key, int64_t v);
void json_kv_f64(json_t *j, const char *key, double v);
void json_kv_bool(json_t *j, const char *key, bool v);

#endif
