"""The smallest ``cplxnet train --task lm`` options the language-model CLI tests share (a d = 8
decoder, 4 steps, evaluated every 2)."""

TINY_LM = ["--task", "lm", "--d-model", "8", "--steps", "4", "--eval-every", "2", "--batch-size",
           "4", "--quiet", "--threads", "1"]  # fmt: skip
