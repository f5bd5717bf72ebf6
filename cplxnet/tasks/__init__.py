"""The tasks the engine (:mod:`cplxnet.engine`) trains: :mod:`~cplxnet.tasks.classify` (text
classification, with the synthetic order task of :mod:`~cplxnet.tasks.classify.synthetic`) and
:mod:`~cplxnet.tasks.lm` (causal language modelling, with the synthetic ``copy`` / ``reverse``
tasks of :mod:`~cplxnet.tasks.lm.synthetic`). Each supplies its data, model, loss, metrics and
evaluation to :func:`cplxnet.engine.fit` through a :class:`cplxnet.engine.Task`."""
