#include "json.h"

#include <math.h>

void json_init(json_t *j, FILE *out)
{
    j->out = out;
    j->depth = 0;
    j->has_items[0] = false;
    j->after_key = false;
}

/* Write the separator a new value needs: none after a key, a comma between
 * items of the same container. */
static void before_value(json_t *j)
{
    if (j->after_key) {
        j->after_key = false;
        return;
    }
    if (j->has_items[j->depth])
        fputc(',', j->out);
    j->has_items[j->depth] = true;
}

static void open(json_t *j, char c)
{
    before_value(j);
    fputc(c, j->out);
    if (j->depth + 1 < JSON_MAX_DEPTH)
        j->depth++;
    j->has_items[j->depth] = false;
}

static void close_(json_t *j, char c)
{
    fputc(c, j->out);
    if (j->depth > 0)
        j->depth--;
}

void json_obj_begin(json_t *j) { open(j, '{'); }
void json_obj_end(json_t *j) { close_(j, '}'); }
void json_arr_begin(json_t *j) { open(j, '['); }
void json_arr_end(json_t *j) { close_(j, ']'); }

static void write_string(FILE *out, const char *s)
{
    fputc('"', out);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        switch (*p) {
        case '"': fputs("\\\"", out); break;
        case '\\': fputs("\\\\", out); break;
        case '\n': fputs("\\n", out); break;
        case '\r': fputs("\\r", out); break;
        case '\t': fputs("\\t", out); break;
        default:
            if (*p < 0x20 || *p == 0x7f)
                fprintf(out, "\\u%04x", *p);
            else
                fputc(*p, out); /* UTF-8 passes through unchanged */
        }
    }
    fputc('"', out);
}

void json_key(json_t *j, const char *key)
{
    before_value(j);
    write_string(j->out, key);
    fputc(':', j->out);
    j->after_key = true;
}

void json_str(json_t *j, const char *s)
{
    before_value(j);
    if (s)
        write_string(j->out, s);
    else
        fputs("null", j->out);
}

void json_u64(json_t *j, uint64_t v)
{
    before_value(j);
    fprintf(j->out, "%llu", (unsigned long long)v);
}

void json_i64(json_t *j, int64_t v)
{
    before_value(j);
    fprintf(j->out, "%lld", (long long)v);
}

void json_f64(json_t *j, double v)
{
    before_value(j);
    if (isfinite(v))
        fprintf(j->out, "%.10g", v);
    else
        fputs("null", j->out);
}

void json_bool(json_t *j, bool v)
{
    before_value(j);
    fputs(v ? "true" : "false", j->out);
}

void json_null(json_t *j)
{
    before_value(j);
    fputs("null", j->out);
}

void json_raw(json_t *j, const char *text)
{
    before_value(j);
    fputs(text, j->out);
}

void json_kv_str(json_t *j, const char *key, const char *s) { json_key(j, key); json_str(j, s); }
void json_kv_u64(json_t *j, const char *key, uint64_t v) { json_key(j, key); json_u64(j, v); }
void json_kv_i64(json_t *j, const char *key, int64_t v) { json_key(j, key); json_i64(j, v); }
void json_kv_f64(json_t *j, const char *key, double v) { json_key(j, key); json_f64(j, v); }
void json_kv_bool(json_t *j, const char *key, bool v) { json_key(j, key); json_bool(j, v); }
