// The task heads in config.json: the head of architectures[0], the label keys (num_labels,
// id2label, label2id), problem_type, classifier_dropout and fat5's classifier_pooling, read from
// the files transformers' save_pretrained writes for every T5 / MT5 / UMT5 head class
// (tests/data/heads_configs, ref/make_heads_configs.py), written back and read again; the label
// names' parser and writer (fat5__cfg_label_names, fat5__cfg_to_json_labels); the refusals.

#ifndef FAT5_TEST_DATA
#define FAT5_TEST_DATA "tests/data"
#endif

// checks that the call fails with status and a message holding needle
#define THC_EXPECT_ERR(T, call, status, needle)                                                             \
    do {                                                                                                    \
        fat5_status s_ = (call);                                                                            \
        const char *e_ = fat5_last_error(fat5_test_ctx(T));                                                 \
        FAT5_CHECK_MSG(T, s_ == (status) && strstr(e_, needle), "%s -> %s '%s', want %s '%s'", #call,       \
                       fat5_status_string(s_), e_, fat5_status_string(status), needle);                     \
    } while (0)

static fat5_status thc_cfg(fat5_test *T, const char *json, fat5_model_config *c) {
    return fat5_model_config_from_json(fat5_test_ctx(T), json, strlen(json), c);
}

static char *thc_read(fat5_test *T, const char *name, size_t *len) {
    char path[512], *buf = NULL;
    snprintf(path, sizeof path, "%s/heads_configs/%s.json", FAT5_TEST_DATA, name);
    if (fat5__read_file(fat5_test_ctx(T), path, (size_t)1 << 20, &buf, len) != FAT5_OK) return NULL;
    return buf;
}

// the head fields of two configs, and the shape fields the head files set
static int thc_same(const fat5_model_config *a, const fat5_model_config *b) {
    return a->head == b->head && a->num_labels == b->num_labels && a->problem_type == b->problem_type &&
           a->classifier_dropout == b->classifier_dropout && a->pooling == b->pooling &&
           strcmp(a->model_type, b->model_type) == 0 && a->vocab_size == b->vocab_size && a->d_model == b->d_model &&
           a->d_kv == b->d_kv && a->d_ff == b->d_ff && a->num_layers == b->num_layers &&
           a->num_decoder_layers == b->num_decoder_layers && a->num_heads == b->num_heads && a->act == b->act &&
           a->gated == b->gated && a->tie_word_embeddings == b->tie_word_embeddings &&
           a->bias_every_layer == b->bias_every_layer && a->dropout_rate == b->dropout_rate;
}

// Every file of tests/data/heads_configs (as transformers 5.24 wrote it): the head, the labels and
// their names, problem_type, classifier_dropout, pooling; fat5's config.json of it names the same
// architecture, says is_encoder_decoder false exactly for the encoder-only heads, and reads back
// to the same config; written with the file's label names, the names read back unchanged.
static void t_heads_config_hf_files(fat5_test *T) {
    static const char *const named3[] = {"neg", "neutral", "pos"};
    static const char *const multi4[] = {"a", "b", "c", "d"};
    static const char *const unicode4[] = {"O", "B-P\xc3\xa9rson", "I-\"quoted\"", "\xe6\x97\xa5\xe6\x9c\xac\\\xe8\xaa\x9e"};
    static const char *const xyz[] = {"x", "y", "z"};
    static const struct {
        const char *file;
        const char *arch;            // the architecture name fat5 writes back
        fat5_head head;
        int64_t num_labels;
        fat5_problem problem;
        double dropout;
        fat5_pool pooling;
        const char *const *names;    // NULL: LABEL_i
    } cases[] = {
        {"T5ForConditionalGeneration", "T5ForConditionalGeneration", FAT5_HEAD_LM, 2, FAT5_PROBLEM_AUTO, 0, FAT5_POOL_EOS, NULL},
        {"T5EncoderModel", "T5EncoderModel", FAT5_HEAD_ENCODER, 2, FAT5_PROBLEM_AUTO, 0, FAT5_POOL_EOS, NULL},
        {"T5ForSequenceClassification", "T5ForSequenceClassification", FAT5_HEAD_SEQ_CLS, 2, FAT5_PROBLEM_AUTO, 0,
         FAT5_POOL_EOS, NULL},
        {"T5ForTokenClassification", "T5ForTokenClassification", FAT5_HEAD_TOKEN_CLS, 2, FAT5_PROBLEM_AUTO, 0,
         FAT5_POOL_EOS, NULL},
        {"T5ForQuestionAnswering", "T5ForQuestionAnswering", FAT5_HEAD_QA, 2, FAT5_PROBLEM_AUTO, 0, FAT5_POOL_EOS, NULL},
        {"MT5ForConditionalGeneration", "MT5ForConditionalGeneration", FAT5_HEAD_LM, 2, FAT5_PROBLEM_AUTO, 0,
         FAT5_POOL_EOS, NULL},
        {"MT5EncoderModel", "MT5EncoderModel", FAT5_HEAD_ENCODER, 2, FAT5_PROBLEM_AUTO, 0, FAT5_POOL_EOS, NULL},
        {"MT5ForSequenceClassification", "MT5ForSequenceClassification", FAT5_HEAD_SEQ_CLS, 2, FAT5_PROBLEM_AUTO, 0,
         FAT5_POOL_EOS, NULL},
        {"MT5ForTokenClassification", "MT5ForTokenClassification", FAT5_HEAD_TOKEN_CLS, 2, FAT5_PROBLEM_AUTO, 0,
         FAT5_POOL_EOS, NULL},
        {"MT5ForQuestionAnswering", "MT5ForQuestionAnswering", FAT5_HEAD_QA, 2, FAT5_PROBLEM_AUTO, 0, FAT5_POOL_EOS,
         NULL},
        {"UMT5ForConditionalGeneration", "UMT5ForConditionalGeneration", FAT5_HEAD_LM, 2, FAT5_PROBLEM_AUTO, 0,
         FAT5_POOL_EOS, NULL},
        {"UMT5EncoderModel", "UMT5EncoderModel", FAT5_HEAD_ENCODER, 2, FAT5_PROBLEM_AUTO, 0, FAT5_POOL_EOS, NULL},
        {"UMT5ForSequenceClassification", "UMT5ForSequenceClassification", FAT5_HEAD_SEQ_CLS, 2, FAT5_PROBLEM_AUTO, 0,
         FAT5_POOL_EOS, NULL},
        {"UMT5ForTokenClassification", "UMT5ForTokenClassification", FAT5_HEAD_TOKEN_CLS, 2, FAT5_PROBLEM_AUTO, 0,
         FAT5_POOL_EOS, NULL},
        {"UMT5ForQuestionAnswering", "UMT5ForQuestionAnswering", FAT5_HEAD_QA, 2, FAT5_PROBLEM_AUTO, 0, FAT5_POOL_EOS,
         NULL},
        {"T5ForSequenceClassification_named3", "T5ForSequenceClassification", FAT5_HEAD_SEQ_CLS, 3,
         FAT5_PROBLEM_SINGLE_LABEL, 0.1, FAT5_POOL_EOS, named3},
        {"MT5ForSequenceClassification_regression", "MT5ForSequenceClassification", FAT5_HEAD_SEQ_CLS, 1,
         FAT5_PROBLEM_REGRESSION, 0, FAT5_POOL_EOS, NULL},
        {"UMT5ForSequenceClassification_multi4", "UMT5ForSequenceClassification", FAT5_HEAD_SEQ_CLS, 4,
         FAT5_PROBLEM_MULTI_LABEL, 0.25, FAT5_POOL_EOS, multi4},
        {"T5ForTokenClassification_unicode", "T5ForTokenClassification", FAT5_HEAD_TOKEN_CLS, 4, FAT5_PROBLEM_AUTO, 0,
         FAT5_POOL_EOS, unicode4},
        {"Fat5EncoderForSequenceClassification_mean", "Fat5EncoderForSequenceClassification", FAT5_HEAD_ENC_SEQ_CLS, 3,
         FAT5_PROBLEM_SINGLE_LABEL, 0.1, FAT5_POOL_MEAN, xyz},
    };
    fat5_ctx *ctx = fat5_test_ctx(T);
    size_t i;
    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        fat5_model_config c, back;
        size_t len = 0, out_len = 0;
        char *text = thc_read(T, cases[i].file, &len), *out = NULL, **names = NULL, **names_back = NULL;
        char arch[96];
        int64_t k;
        FAT5_REQUIRE(T, text != NULL);
        FAT5_REQUIRE_OK(T, fat5_model_config_from_json(ctx, text, len, &c));
        FAT5_CHECK_MSG(T, c.head == cases[i].head && c.num_labels == cases[i].num_labels &&
                              c.problem_type == cases[i].problem && c.classifier_dropout == cases[i].dropout &&
                              c.pooling == cases[i].pooling,
                       "%s: head %d num_labels %lld problem %d dropout %g pooling %d", cases[i].file, (int)c.head,
                       (long long)c.num_labels, (int)c.problem_type, c.classifier_dropout, (int)c.pooling);
        FAT5_CHECK_MSG(T, strcmp(fat5__cfg_arch_name(&c), cases[i].arch) == 0, "%s: arch %s", cases[i].file,
                       fat5__cfg_arch_name(&c));
        FAT5_CHECK(T, c.num_layers == 2 && c.num_decoder_layers == 1 && c.d_model == 16 && c.vocab_size == 64);
        // the label names of the file
        FAT5_REQUIRE_OK(T, fat5__cfg_label_names(ctx, text, len, c.num_labels, &names));
        for (k = 0; k < c.num_labels; k++) {
            char def[32];
            snprintf(def, sizeof def, "LABEL_%lld", (long long)k);
            FAT5_CHECK_MSG(T, strcmp(names[k], cases[i].names ? cases[i].names[k] : def) == 0, "%s: label %lld '%s'",
                           cases[i].file, (long long)k, names[k]);
        }
        // fat5's config.json of it, with and without the names
        FAT5_REQUIRE_OK(T, fat5__cfg_to_json_labels(ctx, &c, (const char *const *)names, &out, &out_len));
        snprintf(arch, sizeof arch, "\"architectures\": [\"%s\"]", cases[i].arch);
        FAT5_CHECK_MSG(T, strstr(out, arch) != NULL, "%s: %s", cases[i].file, out);
        // is_encoder_decoder and use_cache as transformers wrote them (false for T5 and MT5's encoder-only classes)
        FAT5_CHECK_MSG(T, !strstr(out, "\"is_encoder_decoder\": false") == !strstr(text, "\"is_encoder_decoder\": false") &&
                              !strstr(out, "\"use_cache\": false") == !strstr(text, "\"use_cache\": false"),
                       "%s: is_encoder_decoder or use_cache differ from transformers': %s", cases[i].file, out);
        FAT5_CHECK(T, !strstr(out, "\"is_encoder_decoder\": false") ==
                          !(fat5__head_encoder_only(c.head) && strcmp(c.model_type, "umt5") != 0));
        FAT5_CHECK_MSG(T, (strstr(out, "\"id2label\"") != NULL) == (c.head != FAT5_HEAD_LM) &&
                              (strstr(out, "\"classifier_dropout\"") != NULL) == (c.head != FAT5_HEAD_LM) &&
                              (strstr(out, "\"classifier_pooling\"") != NULL) == (c.head == FAT5_HEAD_ENC_SEQ_CLS) &&
                              strstr(out, "\"num_labels\"") == NULL,
                       "%s: the head keys of %s", cases[i].file, out);
        FAT5_REQUIRE_OK(T, fat5_model_config_from_json(ctx, out, out_len, &back));
        FAT5_CHECK_MSG(T, thc_same(&c, &back), "%s: changed in a round trip: %s", cases[i].file, out);
        if (c.head != FAT5_HEAD_LM) {
            FAT5_REQUIRE_OK(T, fat5__cfg_label_names(ctx, out, out_len, c.num_labels, &names_back));
            for (k = 0; k < c.num_labels; k++)
                FAT5_CHECK_MSG(T, strcmp(names[k], names_back[k]) == 0, "%s: label %lld '%s' read back as '%s'",
                               cases[i].file, (long long)k, names[k], names_back[k]);
            fat5_free(ctx, names_back);
        }
        fat5_free(ctx, out);
        FAT5_REQUIRE_OK(T, fat5_model_config_to_json(ctx, &c, &out, &out_len));
        FAT5_REQUIRE_OK(T, fat5_model_config_from_json(ctx, out, out_len, &back));
        FAT5_CHECK_MSG(T, thc_same(&c, &back), "%s: changed in a round trip without names", cases[i].file);
        fat5_free(ctx, out);
        fat5_free(ctx, names);
        fat5_free(ctx, text);
    }
}

// Label names: non-ASCII, quotes, backslashes and control characters go through config.json
// unchanged; fewer or more names than the file's; LABEL_i without id2label; an LM writes no names.
static void t_heads_config_label_names(fat5_test *T) {
    static const char *const names5[] = {"caf\xc3\xa9 \"cr\xc3\xa8me\"", "back\\slash", "tab\there\nnewline",
                                         "\xf0\x9f\x98\x80", "LABEL_0x"};
    fat5_ctx *ctx = fat5_test_ctx(T);
    fat5_model_config c = fat5_model_config_default(), back;
    char *out = NULL, **names = NULL;
    size_t len = 0;
    int64_t k;
    c.head = FAT5_HEAD_TOKEN_CLS;
    c.num_labels = 5;
    FAT5_REQUIRE_OK(T, fat5__cfg_to_json_labels(ctx, &c, names5, &out, &len));
    FAT5_REQUIRE_OK(T, fat5_model_config_from_json(ctx, out, len, &back));
    FAT5_CHECK(T, back.head == FAT5_HEAD_TOKEN_CLS && back.num_labels == 5);
    FAT5_REQUIRE_OK(T, fat5__cfg_label_names(ctx, out, len, 5, &names));
    for (k = 0; k < 5; k++) FAT5_CHECK_MSG(T, strcmp(names[k], names5[k]) == 0, "label %lld '%s'", (long long)k, names[k]);
    fat5_free(ctx, names);
    // two names asked: the file's first two; seven: the file's five, then LABEL_5, LABEL_6
    FAT5_REQUIRE_OK(T, fat5__cfg_label_names(ctx, out, len, 2, &names));
    FAT5_CHECK(T, strcmp(names[0], names5[0]) == 0 && strcmp(names[1], names5[1]) == 0);
    fat5_free(ctx, names);
    FAT5_REQUIRE_OK(T, fat5__cfg_label_names(ctx, out, len, 7, &names));
    FAT5_CHECK(T, strcmp(names[4], names5[4]) == 0 && strcmp(names[5], "LABEL_5") == 0 && strcmp(names[6], "LABEL_6") == 0);
    fat5_free(ctx, names);
    FAT5_REQUIRE_OK(T, fat5__cfg_label_names(ctx, out, len, 0, &names));
    fat5_free(ctx, names);
    fat5_free(ctx, out);
    // no id2label (an LM file, or a label2id of the default names only)
    {
        static const char lm[] = "{\"d_model\": 16}";
        static const char r2[] = "{\"label2id\": {\"LABEL_1\": 1, \"LABEL_0\": 0}}";
        FAT5_REQUIRE_OK(T, fat5__cfg_label_names(ctx, lm, strlen(lm), 3, &names));
        FAT5_CHECK(T, strcmp(names[0], "LABEL_0") == 0 && strcmp(names[2], "LABEL_2") == 0);
        fat5_free(ctx, names);
        FAT5_REQUIRE_OK(T, fat5__cfg_label_names(ctx, r2, strlen(r2), 2, &names));
        FAT5_CHECK(T, strcmp(names[1], "LABEL_1") == 0);
        fat5_free(ctx, names);
    }
    // num_labels and id2label agreeing; label2id null (transformers 5 writes it so)
    FAT5_REQUIRE_OK(T, thc_cfg(T, "{\"architectures\": [\"T5ForSequenceClassification\"], \"num_labels\": 2, "
                                  "\"id2label\": {\"1\": \"b\", \"0\": \"a\"}, \"label2id\": null}", &back));
    FAT5_CHECK(T, back.num_labels == 2);
    FAT5_REQUIRE_OK(T, thc_cfg(T, "{\"architectures\": [\"T5ForSequenceClassification\"], \"num_labels\": 5}", &back));
    FAT5_CHECK(T, back.num_labels == 5);
    // the LM: no label keys written, the default config's text unchanged by the heads
    c = fat5_model_config_default();
    c.num_labels = 7;
    FAT5_REQUIRE_OK(T, fat5__cfg_to_json_labels(ctx, &c, names5, &out, &len));
    FAT5_CHECK(T, !strstr(out, "label") && !strstr(out, "classifier") && !strstr(out, "problem_type") &&
                      strstr(out, "\"architectures\": [\"T5ForConditionalGeneration\"]") &&
                      strstr(out, "\"is_encoder_decoder\": true") && strstr(out, "\"use_cache\": true"));
    fat5_free(ctx, out);
    // an LM file's label keys are checked but not kept (the LM has no classifier)
    FAT5_REQUIRE_OK(T, thc_cfg(T, "{\"id2label\": {\"0\": \"a\", \"1\": \"b\", \"2\": \"c\"}, \"problem_type\": "
                                  "\"regression\", \"classifier_dropout\": 0.5}", &back));
    FAT5_CHECK(T, back.head == FAT5_HEAD_LM && back.num_labels == 2 && back.problem_type == FAT5_PROBLEM_AUTO &&
                      back.classifier_dropout == 0.0);
    // the encoder-only heads need no decoder layer
    FAT5_REQUIRE_OK(T, thc_cfg(T, "{\"architectures\": [\"T5ForTokenClassification\"], \"num_decoder_layers\": 0, "
                                  "\"is_encoder_decoder\": false}", &back));
    FAT5_CHECK(T, back.num_decoder_layers == 0 && back.head == FAT5_HEAD_TOKEN_CLS);
    // classifier_pooling's three values; eos without the key
    FAT5_REQUIRE_OK(T, thc_cfg(T, "{\"architectures\": [\"Fat5EncoderForSequenceClassification\"], "
                                  "\"model_type\": \"umt5\", \"classifier_pooling\": \"first\"}", &back));
    FAT5_CHECK(T, back.pooling == FAT5_POOL_FIRST && back.head == FAT5_HEAD_ENC_SEQ_CLS && back.bias_every_layer);
    FAT5_REQUIRE_OK(T, thc_cfg(T, "{\"architectures\": [\"Fat5EncoderForSequenceClassification\"]}", &back));
    FAT5_CHECK(T, back.pooling == FAT5_POOL_EOS && back.num_labels == 2);
    // the old name of T5ForConditionalGeneration; no architecture at all; an empty list
    FAT5_REQUIRE_OK(T, thc_cfg(T, "{\"architectures\": [\"T5WithLMHeadModel\"]}", &back));
    FAT5_CHECK(T, back.head == FAT5_HEAD_LM);
    FAT5_REQUIRE_OK(T, thc_cfg(T, "{\"architectures\": []}", &back));
    FAT5_CHECK(T, back.head == FAT5_HEAD_LM);
}

// The refusals, each with its message.
static void t_heads_config_rejects(fat5_test *T) {
    static const struct { const char *json; fat5_status want; const char *word; } bad[] = {
        // the architecture
        {"{\"model_type\": \"mt5\", \"architectures\": [\"T5ForTokenClassification\"]}", FAT5_ERR_FORMAT,
         "architecture T5ForTokenClassification contradicts model_type mt5"},
        {"{\"architectures\": [\"UMT5EncoderModel\"]}", FAT5_ERR_FORMAT,
         "architecture UMT5EncoderModel contradicts model_type t5"},
        {"{\"architectures\": [\"T5ForMaskedLM\"]}", FAT5_ERR_UNSUPPORTED, "architecture 'T5ForMaskedLM' is unknown"},
        {"{\"architectures\": [\"MT5Model\"], \"model_type\": \"mt5\"}", FAT5_ERR_UNSUPPORTED,
         "architecture 'MT5Model' is unknown"},
        {"{\"architectures\": [7]}", FAT5_ERR_FORMAT, "'architectures' must hold strings"},
        {"{\"model_type\": \"longt5\", \"architectures\": [\"T5ForSequenceClassification\"]}", FAT5_ERR_FORMAT,
         "architecture T5ForSequenceClassification contradicts model_type longt5"},
        {"{\"model_type\": \"longt5\", \"architectures\": [\"Fat5EncoderForSequenceClassification\"]}",
         FAT5_ERR_UNSUPPORTED, "Fat5EncoderForSequenceClassification needs model_type t5, mt5 or umt5, not longt5"},
        {"{\"model_type\": \"longt5\", \"architectures\": [\"LongT5EncoderModel\"]}", FAT5_ERR_UNSUPPORTED,
         "LongT5EncoderModel is not supported"},
        {"{\"model_type\": \"t5\", \"architectures\": [\"FlashT5ForConditionalGeneration\"]}", FAT5_ERR_UNSUPPORTED,
         "architecture 'FlashT5ForConditionalGeneration' is unknown"},
        // is_encoder_decoder false on a head with a decoder
        {"{\"architectures\": [\"T5ForSequenceClassification\"], \"is_encoder_decoder\": false}", FAT5_ERR_UNSUPPORTED,
         "is_encoder_decoder false contradicts architecture T5ForSequenceClassification"},
        {"{\"architectures\": [\"MT5ForQuestionAnswering\"], \"model_type\": \"mt5\", \"is_encoder_decoder\": false}",
         FAT5_ERR_UNSUPPORTED, "is_encoder_decoder false contradicts architecture MT5ForQuestionAnswering"},
        {"{\"is_encoder_decoder\": false}", FAT5_ERR_UNSUPPORTED,
         "is_encoder_decoder false contradicts architecture T5ForConditionalGeneration"},
        // QA's two outputs
        {"{\"architectures\": [\"T5ForQuestionAnswering\"], \"num_labels\": 3}", FAT5_ERR_FORMAT,
         "num_labels = 3, expected 2 for T5ForQuestionAnswering"},
        {"{\"architectures\": [\"T5ForQuestionAnswering\"], \"id2label\": {\"0\": \"a\", \"1\": \"b\", \"2\": \"c\"}}",
         FAT5_ERR_FORMAT, "num_labels = 3, expected 2 for T5ForQuestionAnswering"},
        // the labels
        {"{\"architectures\": [\"T5ForTokenClassification\"], \"id2label\": {\"0\": \"a\", \"1\": \"a\"}}",
         FAT5_ERR_FORMAT, "the name 'a' is given to labels 0 and 1 (label2id could not be inverted)"},
        {"{\"id2label\": {\"0\": \"x\", \"1\": \"y\", \"2\": \"x\"}}", FAT5_ERR_FORMAT,
         "the name 'x' is given to labels 0 and 2"},
        {"{\"num_labels\": 3, \"id2label\": {\"0\": \"a\", \"1\": \"b\"}}", FAT5_ERR_FORMAT,
         "num_labels = 3 contradicts id2label's 2 labels"},
        {"{\"id2label\": {\"0\": \"a\", \"2\": \"c\"}}", FAT5_ERR_FORMAT, "id2label key '2' is not a label index 0..1"},
        {"{\"id2label\": {\"0\": \"a\", \"01\": \"c\"}}", FAT5_ERR_FORMAT, "id2label key '01'"},
        {"{\"id2label\": {\"0\": \"a\", \"1\": 2}}", FAT5_ERR_FORMAT, "id2label['1'] must be a string"},
        {"{\"id2label\": {\"0\": \"a\\u0000b\", \"1\": \"b\"}}", FAT5_ERR_FORMAT, "\\u0000 in a string is not supported"},
        {"{\"id2label\": [\"a\", \"b\"]}", FAT5_ERR_FORMAT, "'id2label' must be an object"},
        {"{\"id2label\": {\"0\": \"a\", \"1\": \"b\"}, \"label2id\": {\"a\": 1, \"b\": 0}}", FAT5_ERR_FORMAT,
         "label2id['a'] = 1 contradicts id2label (label 1 is 'b')"},
        {"{\"id2label\": {\"0\": \"a\", \"1\": \"b\"}, \"label2id\": {\"a\": 0}}", FAT5_ERR_FORMAT,
         "label2id lacks label 1 ('b')"},
        {"{\"id2label\": {\"0\": \"a\", \"1\": \"b\"}, \"label2id\": {\"a\": 0, \"b\": 2}}", FAT5_ERR_FORMAT,
         "label2id['b'] must be a label id 0..1"},
        {"{\"label2id\": {\"neg\": 0, \"pos\": 1}}", FAT5_ERR_FORMAT, "label2id['neg'] = 0 contradicts id2label (label 0 is 'LABEL_0')"},
        {"{\"num_labels\": -1}", FAT5_ERR_FORMAT, "'num_labels' must be an integer"},
        {"{\"architectures\": [\"T5ForSequenceClassification\"], \"num_labels\": 0}", FAT5_ERR_FORMAT,
         "num_labels = 0, expected 1.."},
        // problem_type, dropout, pooling, decoder layers
        {"{\"architectures\": [\"T5ForSequenceClassification\"], \"problem_type\": \"ranking\"}", FAT5_ERR_FORMAT,
         "problem_type 'ranking' is unknown"},
        {"{\"architectures\": [\"T5ForSequenceClassification\"], \"classifier_dropout\": 1.0}", FAT5_ERR_FORMAT,
         "classifier_dropout = 1, expected 0 <= rate < 1"},
        {"{\"architectures\": [\"T5ForTokenClassification\"], \"classifier_dropout\": null}", FAT5_ERR_FORMAT,
         "'classifier_dropout' must be a number"},
        {"{\"architectures\": [\"T5ForSequenceClassification\"], \"classifier_pooling\": \"mean\"}", FAT5_ERR_FORMAT,
         "classifier_pooling is a key of Fat5EncoderForSequenceClassification; architecture "
         "T5ForSequenceClassification has no pooling"},
        {"{\"classifier_pooling\": \"eos\"}", FAT5_ERR_FORMAT,
         "architecture T5ForConditionalGeneration has no pooling"},
        {"{\"architectures\": [\"Fat5EncoderForSequenceClassification\"], \"classifier_pooling\": \"max\"}",
         FAT5_ERR_FORMAT, "classifier_pooling 'max' is unknown"},
        {"{\"architectures\": [\"T5ForSequenceClassification\"], \"num_decoder_layers\": 0}", FAT5_ERR_UNSUPPORTED,
         "num_decoder_layers = 0, expected 1..1024 (T5ForSequenceClassification has a decoder)"},
        {"{\"num_decoder_layers\": 0}", FAT5_ERR_UNSUPPORTED, "num_decoder_layers = 0"},
    };
    fat5_ctx *ctx = fat5_test_ctx(T);
    fat5_model_config c;
    char *out = NULL, **names = NULL;
    size_t i, len;
    for (i = 0; i < sizeof bad / sizeof bad[0]; i++) THC_EXPECT_ERR(T, thc_cfg(T, bad[i].json, &c), bad[i].want, bad[i].word);
    // what only a C caller can set
    c = fat5_model_config_default();
    c.head = FAT5_HEAD_SEQ_CLS;
    c.pooling = FAT5_POOL_MEAN;
    THC_EXPECT_ERR(T, fat5_model_config_validate(ctx, &c), FAT5_ERR_INVALID_ARG,
                   "classifier_pooling mean is Fat5EncoderForSequenceClassification's; T5ForSequenceClassification has none");
    c.head = FAT5_HEAD_ENC_SEQ_CLS;
    c.pooling = FAT5_POOL_NONE;
    THC_EXPECT_ERR(T, fat5_model_config_validate(ctx, &c), FAT5_ERR_INVALID_ARG, "classifier_pooling none");
    c = fat5_model_config_default();
    c.head = FAT5_HEAD_TOKEN_CLS;
    c.problem_type = FAT5_PROBLEM_REGRESSION;
    THC_EXPECT_ERR(T, fat5_model_config_validate(ctx, &c), FAT5_ERR_INVALID_ARG,
                   "problem_type regression is a sequence classifier's loss; T5ForTokenClassification has none");
    c = fat5_model_config_default();
    c.head = FAT5_HEAD_TOKEN_CLS;
    c.num_labels = (int64_t)1 << 24;
    THC_EXPECT_ERR(T, fat5_model_config_validate(ctx, &c), FAT5_ERR_INVALID_ARG, "num_labels = 16777216, expected 1..");
    c.num_labels = 2;
    c.classifier_dropout = NAN;
    THC_EXPECT_ERR(T, fat5_model_config_validate(ctx, &c), FAT5_ERR_INVALID_ARG, "classifier_dropout = nan");
    c = fat5_model_config_default();
    c.head = (fat5_head)6;
    THC_EXPECT_ERR(T, fat5_model_config_validate(ctx, &c), FAT5_ERR_INVALID_ARG, "head 6 is not a fat5_head");
    c = fat5_model_config_default();
    memcpy(c.model_type, "longt5", 7);
    c.enc_attention = FAT5_ENC_ATTN_LOCAL;
    c.head = FAT5_HEAD_ENCODER;
    THC_EXPECT_ERR(T, fat5_model_config_validate(ctx, &c), FAT5_ERR_UNSUPPORTED, "model_type longt5 has the LM head only");
    FAT5_CHECK(T, fat5__cfg_arch_name(&c) == NULL);
    // names the writer refuses: twice the same, not UTF-8, NULL
    {
        static const char *const dup[] = {"p", "q", "p"};
        static const char *const bad_utf8[] = {"p", "\xff"};
        static const char *const null_name[] = {"p", NULL};
        c = fat5_model_config_default();
        c.head = FAT5_HEAD_SEQ_CLS;
        c.num_labels = 3;
        THC_EXPECT_ERR(T, fat5__cfg_to_json_labels(ctx, &c, dup, &out, &len), FAT5_ERR_INVALID_ARG,
                       "label names: the name 'p' is given to labels 0 and 2");
        c.num_labels = 2;
        THC_EXPECT_ERR(T, fat5__cfg_to_json_labels(ctx, &c, bad_utf8, &out, &len), FAT5_ERR_INVALID_ARG,
                       "name 1 '?' is not valid UTF-8");
        THC_EXPECT_ERR(T, fat5__cfg_to_json_labels(ctx, &c, null_name, &out, &len), FAT5_ERR_INVALID_ARG,
                       "name 1 is NULL");
    }
    // the names' parser checks the label keys as the config's parser does
    {
        static const char dup[] = "{\"id2label\": {\"0\": \"a\", \"1\": \"a\"}}";
        THC_EXPECT_ERR(T, fat5__cfg_label_names(ctx, dup, strlen(dup), 2, &names), FAT5_ERR_FORMAT,
                       "the name 'a' is given to labels 0 and 1");
        FAT5_CHECK(T, names == NULL);
        THC_EXPECT_ERR(T, fat5__cfg_label_names(ctx, "{}", 2, -1, &names), FAT5_ERR_INVALID_ARG, "n = -1");
    }
}

#define FAT5_TESTS_HEADS_CONFIG(X) X(heads_config_hf_files) X(heads_config_label_names) X(heads_config_rejects)
