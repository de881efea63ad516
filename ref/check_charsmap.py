#!/usr/bin/env python3
"""Checks the precompiled charsmaps fat5 builds (fat5__tt_charsmap) against sentencepiece and tokenizers.

    python ref/check_charsmap.py [--rule nmt_nfkc|nfkc|both] [--work DIR]

Needs sentencepiece (0.2) and tokenizers, and a C compiler; run from the repository root after
`make amalgamate`. It compiles dev/charsmap_dump.c, which writes fat5's blob for the rule and what
fat5's normaliser (the charsmap alone) makes of every code point and of a list of lines, then:

  1. sentencepiece: a model whose normalizer_spec carries fat5's blob (whitespace handling off)
     normalises every code point (0..U+10FFFF but the surrogates) and the lines exactly as fat5 does;
     so does fat5's own spiece.model (fat5__tt_spm_bytes) loaded by sentencepiece (spaces as U+2581);
  2. tokenizers: normalizers.Precompiled(fat5's blob) gives on every code point what fat5 gives, and
     on every code point and line what Precompiled(sentencepiece's own blob) gives where the two
     blobs hold the same rules;
  3. sentencepiece's own charsmap for the rule (the one spm_train writes): the rules of both blobs
     (decompiled), and the normalisation of every code point and line with each; every difference
     is listed with whether a code point of it is unassigned in Unicode 15.0 (fat5's Unicode data;
     /usr/share/unicode/DerivedAge.txt).

The lines: every key of both blobs, the keys with a code point of their own appended, and random
mixes of letters, combining marks, Hangul jamo, spaces and controls. Exits non-zero when 1 or 2
fails; 3 is reported.
"""
import argparse
import os
import random
import struct
import subprocess
import sys
import tempfile


def decompile(blob):
    """The rules of a precompiled charsmap: {key bytes: replacement bytes}, and the unit count."""
    size = struct.unpack('<I', blob[:4])[0]
    units = struct.unpack('<%dI' % (size // 4), blob[4:4 + size])
    pool = blob[4 + size:]

    def off(u):
        return (u >> 10) << ((u & 0x200) >> 6)

    rules = {}
    stack = [(off(units[0]), b'')]
    while stack:
        base, key = stack.pop()
        for c in range(1, 256):
            p = base ^ c
            if p >= len(units) or (units[p] & 0x800000ff) != c:
                continue
            nb = p ^ off(units[p])
            k = key + bytes([c])
            if (units[p] >> 8) & 1:
                v = units[nb] & 0x7fffffff
                rules[k] = pool[v:pool.index(b'\0', v)]
            stack.append((nb, k))
    return rules, len(units)


def read_outputs(path):
    out, data, i = [], open(path, 'rb').read(), 0
    while i < len(data):
        n = struct.unpack('<I', data[i:i + 4])[0]
        out.append(data[i + 4:i + 4 + n].decode('utf-8'))
        i += 4 + n
    return out


def assigned_15():
    """A flag per code point: assigned in Unicode 15.0 (None when DerivedAge.txt is not installed)."""
    path = '/usr/share/unicode/DerivedAge.txt'
    if not os.path.exists(path):
        return None
    assigned = bytearray(0x110000)
    for line in open(path):
        line = line.split('#')[0].strip()
        if not line:
            continue
        r = line.split(';')[0].strip()
        a, b = (r.split('..') + [r])[:2]
        for cp in range(int(a, 16), int(b, 16) + 1):
            assigned[cp] = 1
    return assigned


def show(s):
    return ' '.join('U+%04X' % ord(c) for c in s) or '(empty)'


def check_rule(rule, work, dump, assigned):
    import sentencepiece as spm
    from sentencepiece import sentencepiece_model_pb2 as pb
    from tokenizers import normalizers

    # sentencepiece's own charsmap: a tiny model trained with the rule
    corpus = os.path.join(work, 'corpus.txt')
    with open(corpus, 'w') as f:
        for i in range(200):
            f.write('the quick brown fox jumps over the lazy dog %d\n' % i)
    prefix = os.path.join(work, 'spm_' + rule)
    spm.SentencePieceTrainer.train(input=corpus, model_prefix=prefix, vocab_size=50,
                                   normalization_rule_name=rule, minloglevel=2)
    proto = pb.ModelProto()
    proto.ParseFromString(open(prefix + '.model', 'rb').read())
    spm_blob = proto.normalizer_spec.precompiled_charsmap
    spm_rules, spm_units = decompile(spm_blob)

    # fat5's blob and outputs; the lines first need fat5's keys, so the blob is made twice
    blob_path = os.path.join(work, 'fat5_%s.charsmap' % rule)
    cps_path = os.path.join(work, 'fat5_%s.cps' % rule)
    spiece_path = os.path.join(work, 'fat5_%s.spiece.model' % rule)
    lines_in = os.path.join(work, 'lines_%s.txt' % rule)
    lines_out = os.path.join(work, 'fat5_%s.lines' % rule)
    subprocess.run([dump, rule, blob_path, spiece_path, cps_path], check=True)
    fat5_blob = open(blob_path, 'rb').read()
    fat5_rules, fat5_units = decompile(fat5_blob)

    rng = random.Random(5)
    keys = sorted(set(spm_rules) | set(fat5_rules))
    lines = [k.decode() for k in keys]
    lines += [k.decode() + rng.choice('ae\u0301\u0323\u1161\u11a8 xｅ\u3131') for k in keys[::7]]
    pool = ('aeiouAEIOU ｅＡ\u0301\u0300\u0302\u0308\u0323\u0327\u0341\u0344\u1100\u1161\u11a8\u3131\u314f'
            '\uffa1\uffc2\u3000\u00a0\t\u0001\u200b\u2581\ufffd\uff5e\u0130\u1e9b\u2126\ufb01\u0f73\u0915'
            '\u093c\u0b47\u0b3e\u1fbf\u03b1\u0345\u0313')
    lines += [''.join(rng.choice(pool) for _ in range(rng.randint(1, 8))) for _ in range(20000)]
    lines += ['e\u0301', 'ｅ\u0301', '\u3131\u314f', '\u1100\u1161\u11a8', 'A\u030a', '\u212b', 'ﬁ']
    lines = [l for l in lines if '\n' not in l and '\r' not in l and l]
    with open(lines_in, 'w', encoding='utf-8', newline='\n') as f:
        for l in lines:
            f.write(l + '\n')
    subprocess.run([dump, rule, blob_path, spiece_path, cps_path, lines_in, lines_out], check=True)
    fat5_cps = read_outputs(cps_path)
    fat5_lines = read_outputs(lines_out)
    cps = [cp for cp in range(0x110000) if not 0xD800 <= cp <= 0xDFFF]
    texts = [chr(cp) for cp in cps]
    assert len(fat5_cps) == len(texts) and len(fat5_lines) == len(lines)

    def spm_normalizer(blob):
        p = pb.ModelProto()
        p.CopyFrom(proto)
        p.normalizer_spec.precompiled_charsmap = blob
        p.normalizer_spec.add_dummy_prefix = False
        p.normalizer_spec.remove_extra_whitespaces = False
        p.normalizer_spec.escape_whitespaces = False
        sp = spm.SentencePieceProcessor()
        sp.LoadFromSerializedProto(p.SerializeToString())
        return sp

    def new_in_16(s):   # a code point Unicode 15.0 leaves unassigned
        return assigned is not None and any(not assigned[ord(c)] for c in s)

    failed = 0
    print('== %s: fat5 blob %d bytes (%d units, %d rules); sentencepiece\'s %d bytes (%d units, %d rules)'
          % (rule, len(fat5_blob), fat5_units, len(fat5_rules), len(spm_blob), spm_units, len(spm_rules)))

    # 1. sentencepiece with fat5's blob
    sp = spm_normalizer(fat5_blob)
    sp_cps = sp.Normalize(texts)
    sp_lines = sp.Normalize(lines)
    bad = [i for i in range(len(texts)) if sp_cps[i] != fat5_cps[i]]
    badl = [i for i in range(len(lines)) if sp_lines[i] != fat5_lines[i]]
    print('1. sentencepiece with fat5\'s blob vs fat5: %d of %d code points differ, %d of %d lines'
          % (len(bad), len(texts), len(badl), len(lines)))
    for i in bad[:10]:
        print('   %s: sentencepiece %s, fat5 %s' % (show(texts[i]), show(sp_cps[i]), show(fat5_cps[i])))
    for i in badl[:10]:
        print('   %s: sentencepiece %s, fat5 %s' % (show(lines[i]), show(sp_lines[i]), show(fat5_lines[i])))
    failed += len(bad) + len(badl)
    # fat5's own spiece.model (the trainer's writer): sentencepiece loads it and normalises the
    # same, its spaces written U+2581
    sp_own = spm.SentencePieceProcessor(model_file=spiece_path)
    own = sp_own.Normalize(texts)
    bad = [i for i in range(len(texts)) if own[i] != fat5_cps[i].replace(' ', '\u2581')]
    print('   sentencepiece loading fat5\'s spiece.model vs fat5: %d of %d code points differ' % (len(bad), len(texts)))
    for i in bad[:10]:
        print('   %s: sentencepiece %s, fat5 %s' % (show(texts[i]), show(own[i]), show(fat5_cps[i])))
    failed += len(bad)

    # 2. tokenizers' Precompiled with fat5's blob (and with sentencepiece's)
    tk = normalizers.Precompiled(fat5_blob)
    tk_spm = normalizers.Precompiled(spm_blob)
    tk_cps = [tk.normalize_str(t) for t in texts]
    bad = [i for i in range(len(texts)) if tk_cps[i] != fat5_cps[i]]
    print('2. tokenizers Precompiled(fat5 blob) vs fat5: %d of %d code points differ' % (len(bad), len(texts)))
    for i in bad[:10]:
        print('   %s: tokenizers %s, fat5 %s' % (show(texts[i]), show(tk_cps[i]), show(fat5_cps[i])))
    failed += len(bad)
    comparable = [i for i in range(len(lines)) if not new_in_16(lines[i])]
    bad = [i for i in comparable if tk.normalize_str(lines[i]) != tk_spm.normalize_str(lines[i])]
    print('   tokenizers Precompiled(fat5 blob) vs Precompiled(sentencepiece blob): %d of %d lines '
          '(those without a Unicode 16 code point) differ' % (len(bad), len(comparable)))
    for i in bad[:10]:
        print('   %s: fat5 blob %s, sentencepiece blob %s' % (show(lines[i]), show(tk.normalize_str(lines[i])),
                                                             show(tk_spm.normalize_str(lines[i]))))
    failed += len(bad)

    # 3. sentencepiece's own charsmap
    only_spm = sorted(k for k in spm_rules if k not in fat5_rules)
    only_fat5 = sorted(k for k in fat5_rules if k not in spm_rules)
    differ = sorted(k for k in fat5_rules if k in spm_rules and fat5_rules[k] != spm_rules[k])
    print('3. rules: %d only in sentencepiece\'s (%d of them with a code point unassigned in Unicode 15.0), '
          '%d only in fat5\'s, %d with another replacement'
          % (len(only_spm), sum(new_in_16(k.decode()) for k in only_spm), len(only_fat5), len(differ)))
    for k in [k for k in only_spm if not new_in_16(k.decode())][:20] + only_fat5[:20] + differ[:20]:
        print('   %s: sentencepiece %s, fat5 %s' % (show(k.decode()), show(spm_rules.get(k, b'-').decode()),
                                                    show(fat5_rules.get(k, b'-').decode())))
    sp2 = spm_normalizer(spm_blob)
    sp2_cps = sp2.Normalize(texts)
    sp2_lines = sp2.Normalize(lines)
    bad = [i for i in range(len(texts)) if sp2_cps[i] != fat5_cps[i]]
    badl = [i for i in range(len(lines)) if sp2_lines[i] != fat5_lines[i]]
    print('   normalised with sentencepiece\'s blob vs fat5: %d code points differ (%d of them unassigned in '
          'Unicode 15.0), %d lines (%d with such a code point)'
          % (len(bad), sum(new_in_16(texts[i]) for i in bad), len(badl), sum(new_in_16(lines[i]) for i in badl)))
    for i in [i for i in bad if not new_in_16(texts[i])][:10]:
        print('   %s: sentencepiece %s, fat5 %s' % (show(texts[i]), show(sp2_cps[i]), show(fat5_cps[i])))
    return failed


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--rule', default='both', choices=['nmt_nfkc', 'nfkc', 'both'])
    ap.add_argument('--work', help='a directory for the files (default: a temporary one)')
    args = ap.parse_args()
    work = args.work or tempfile.mkdtemp(prefix='check_charsmap.')
    os.makedirs(work, exist_ok=True)
    dump = os.path.join(work, 'charsmap_dump')
    subprocess.run([os.environ.get('CC', 'cc'), '-std=c99', '-O2', '-I.', '-o', dump, 'dev/charsmap_dump.c',
                    '-lm', '-ldl', '-lpthread'], check=True)
    assigned = assigned_15()
    failed = 0
    for rule in (['nmt_nfkc', 'nfkc'] if args.rule == 'both' else [args.rule]):
        failed += check_rule(rule, work, dump, assigned)
    print('FAILED' if failed else 'OK')
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
