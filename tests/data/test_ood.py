import torch

from laya.data.datasets import InputSpec
from laya.data.ood import balanced_sample, ood_sets


def test_balanced_sample_takes_every_class_equally_at_random():
    labels = torch.arange(10).repeat_interleave(100)  # sorted by class, like CIFAR-10's test split
    index = balanced_sample(labels, 200, seed=0)
    assert len(index) == 200 and len(set(index.tolist())) == 200
    assert torch.bincount(labels[index], minlength=10).tolist() == [20] * 10  # not the first 200 (classes 0, 1)
    assert torch.equal(index, balanced_sample(labels, 200, seed=0))  # seeded
    assert not torch.equal(index, balanced_sample(labels, 200, seed=1))
    counts = torch.bincount(labels[balanced_sample(labels, 205, seed=3)], minlength=10)
    assert counts.sum() == 205 and set(counts.tolist()) == {20, 21}


def test_balanced_sample_fills_small_classes_from_the_others():
    labels = torch.tensor([0] * 3 + [1] * 50 + [2] * 50)
    index = balanced_sample(labels, 30, seed=0)
    counts = torch.bincount(labels[index], minlength=3).tolist()
    assert sum(counts) == 30 and counts[0] == 3 and len(set(index.tolist())) == 30
    assert sorted(balanced_sample(labels, 500).tolist()) == list(range(103))  # more than there is: everything


def test_noise_sets_state_their_size_and_seed():
    sets = ood_sets("colours", InputSpec(channels=3, source_size=8, size=8, mean=(0.5,) * 3, std=(0.5,) * 3), 12, seed=4)
    assert set(sets) == {"uniform noise", "gaussian noise"}
    assert sets["uniform noise"].images.shape == (12, 3, 8, 8)
    assert sets["uniform noise"].description.startswith("12 images 3x8x8, seed 4")
