"""A head explained over the layers it reads: leave-one-layer-out and deletion curves
(:mod:`~laya.analysis.head.ablation`), layer scores, intrinsic (LAYA's α) and post hoc
(:mod:`~laya.analysis.head.attribution`), their faithfulness to leave-one-layer-out
(:mod:`~laya.analysis.head.faithfulness`), the exact per-layer logit terms and spatial maps
(:mod:`~laya.analysis.head.logit_attribution`, :mod:`~laya.analysis.head.spatial`), class-wise depth profiles
(:mod:`~laya.analysis.head.profiles`) and one input explained (:mod:`~laya.analysis.head.explain`). The network
explained by its own units is :mod:`laya.analysis.network`."""
