"""Fine-tuning as the authors' code does it (Dhillon et al. sec. 3, A.3, A.4): BatchNorm in
training mode on the fine-tuning batches, A.4 augmentation, and the named deviations
(`freeze_batch_norm`, `augment=False`)."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from learners.feed.episode_batch import Normalization, episode_to_tensors
from learners.feed.synthetic_episodes import SyntheticEpisodeConfig, SyntheticEpisodeSource
from learners.inference.finetune import (
    DHILLON_BN_MICRO_BATCH,
    CosineHead,
    FinetuneOptions,
    batch_norm_training,
    finetune_network,
    finetune_query_logits,
    micro_batched_logits,
    micro_batches,
)
from learners.inference.finetune_augment import augment_images, change_lighting, flip_and_crop
from learners.nn.backbones import BackboneConfig, DropBlock, build_backbone

torch.set_num_threads(1)


def tiny_network() -> nn.Module:
    torch.manual_seed(0)
    backbone = build_backbone(BackboneConfig("cnn4", image_size=28, width=0.25))
    return nn.Sequential(backbone, nn.Linear(backbone.out_dim, 12))


def one_episode():
    config = SyntheticEpisodeConfig(ways=5, shots=1, queries=3)
    episode = SyntheticEpisodeSource("test", seed=4, config=config).episode(0)
    return episode_to_tensors(episode, "cpu", image_size=28)


def first_norm(network: nn.Module) -> nn.BatchNorm2d:
    return next(m for m in network.modules() if isinstance(m, nn.BatchNorm2d))


def test_batch_norm_learns_the_support_statistics_by_default() -> None:
    """lr 0 isolates BatchNorm: after E support batches the running mean of the first layer is
    (1 - m)^E old + (1 - (1 - m)^E) batch mean, the momentum rule of training mode."""
    network, ep = tiny_network(), one_episode()
    norm = first_norm(network)
    norm.running_mean.fill_(0.3)  # pre-training statistics unlike this episode's
    old = norm.running_mean.clone()
    epochs, keep = 7, 1.0 - norm.momentum
    options = FinetuneOptions(epochs=epochs, lr=0.0, augment=False)
    model, _ = finetune_network(network, ep, options)
    with torch.no_grad():
        batch_mean = network[0].blocks[0](ep.support_images).mean(dim=(0, 2, 3))
    expected = keep**epochs * old + (1 - keep**epochs) * batch_mean
    assert torch.allclose(first_norm(model).running_mean, expected, atol=1e-5)
    assert not model.training  # the query prediction runs in evaluation mode
    assert torch.equal(norm.running_mean, old)  # the pre-trained network is left unchanged


def test_frozen_batch_norm_and_no_augmentation_change_nothing_at_lr_zero() -> None:
    """The deviation keeps pre-training statistics: at lr 0 fine-tuning is support-based init."""
    network, ep = tiny_network(), one_episode()
    options = FinetuneOptions(
        epochs=3, lr=0.0, transductive=True, freeze_batch_norm=True, augment=False
    )
    logits = finetune_query_logits(network, ep, options)
    network.eval()
    with torch.no_grad():
        head = CosineHead.from_support(network(ep.support_images), ep.support_labels, ep.ways)
        initial = head(network(ep.query_images))
    assert torch.allclose(logits, initial, atol=1e-6)
    default = finetune_query_logits(network, ep, FinetuneOptions(epochs=3, lr=0.0))
    assert not torch.allclose(default, initial, atol=1e-3)  # BatchNorm statistics moved


def test_only_batch_norm_layers_train_dropblock_stays_off() -> None:
    backbone = build_backbone(
        BackboneConfig("resnet12", image_size=28, width=0.125, dropblock=True)
    )
    batch_norm_training(backbone)
    norms = [m for m in backbone.modules() if isinstance(m, nn.BatchNorm2d)]
    drops = [m for m in backbone.modules() if isinstance(m, DropBlock)]
    assert norms and drops
    assert all(m.training for m in norms) and not any(m.training for m in drops)


def test_flip_and_crop_is_a_crop_of_the_reflection_padded_image() -> None:
    torch.manual_seed(1)
    images = torch.rand(6, 3, 10, 12)
    out = flip_and_crop(images)
    assert out.shape == images.shape
    for original, augmented in zip(images, out):
        matches = 0
        for candidate in (original, original.flip(-1)):
            padded = nn.functional.pad(candidate[None], (4, 4, 4, 4), mode="reflect")[0]
            for top in range(9):
                for left in range(9):
                    window = padded[:, top : top + 10, left : left + 12]
                    matches += int(torch.equal(window, augmented))
        assert matches >= 1


def test_lighting_is_brightness_and_contrast_in_logit_space() -> None:
    pixels = torch.linspace(0.05, 0.95, 19).view(1, 1, 1, -1).repeat(3, 3, 1, 1)
    same = change_lighting(pixels, torch.full((3,), 0.5), torch.ones(3))
    assert torch.allclose(same, pixels, atol=1e-6)  # change 0.5, scale 1: the identity
    brighter = change_lighting(pixels, torch.full((3,), 0.9), torch.ones(3))
    assert bool((brighter > pixels).all())
    logit = torch.logit(pixels)
    assert torch.allclose(torch.logit(brighter), logit + math.log(9), atol=1e-4)
    stronger = change_lighting(pixels, torch.full((3,), 0.5), torch.full((3,), 1.4))
    assert torch.allclose(torch.logit(stronger), 1.4 * logit, atol=1e-4)


def test_lighting_follows_fastais_order_brightness_then_contrast() -> None:
    """fastai v1 applies brightness, then contrast, to one logit tensor: sigmoid(s (logit x +
    logit c)); the deviation "contrast_first" is sigmoid(s logit x + logit c)."""
    pixels = torch.tensor([0.2, 0.5, 0.7]).view(1, 1, 1, 3).repeat(1, 3, 1, 1)
    c, s = torch.tensor([0.8]), torch.tensor([1.25])
    fastai = change_lighting(pixels, c, s)
    x = pixels[0, 0, 0]
    logit_c = math.log(0.8 / 0.2)
    expected = torch.sigmoid(1.25 * (torch.log(x / (1 - x)) + logit_c))
    assert torch.allclose(fastai[0, 0, 0], expected, atol=1e-6)
    assert abs(float(fastai[0, 0, 0, 1]) - 1 / (1 + math.exp(-1.25 * logit_c))) < 1e-6
    other = change_lighting(pixels, c, s, order="contrast_first")
    assert torch.allclose(
        other[0, 0, 0], torch.sigmoid(1.25 * torch.log(x / (1 - x)) + logit_c), atol=1e-6
    )
    assert not torch.allclose(fastai, other, atol=1e-3)
    with pytest.raises(ValueError, match="lighting order 'fast'"):
        change_lighting(pixels, c, s, order="fast")


def test_augmentation_draws_per_image_and_is_reproducible() -> None:
    normalization = Normalization()
    images = torch.randn(1, 3, 16, 16).repeat(8, 1, 1, 1)  # eight copies of one image
    torch.manual_seed(5)
    first = augment_images(images, normalization)
    torch.manual_seed(5)
    assert torch.equal(first, augment_images(images, normalization))
    distinct = {tuple(row.flatten()[:50].tolist()) for row in first}
    assert len(distinct) == 8  # every copy got its own flip, crop and lighting
    pixels = first * torch.tensor(normalization.std).view(1, 3, 1, 1)
    pixels = pixels + torch.tensor(normalization.mean).view(1, 3, 1, 1)
    assert float(pixels.min()) >= 0.0 and float(pixels.max()) <= 1.0


@pytest.mark.parametrize("freeze, augment", [(False, True), (True, False)])
def test_finetuning_options_are_saved_and_used(freeze: bool, augment: bool) -> None:
    from learners.methods.registry import build_learner, learner_config, learner_config_from_dict

    config = learner_config(
        "transductive",
        image_size=28,
        width=0.25,
        train_class_ids=list(range(12)),
        finetune_freeze_bn=freeze,
        finetune_augment=augment,
    )
    learner = build_learner(learner_config_from_dict(config.to_dict()))
    options = learner.finetune_options(transductive=True)
    assert (options.freeze_batch_norm, options.augment) == (freeze, augment)


def test_multiclass_pretraining_augments_its_batches_by_default() -> None:
    """A.4: the augmentation is "the same for both pre-training and fine-tuning"."""
    from learners import train as train_cli

    def saved(*args: str) -> bool:
        argv = ["--synthetic", "--steps", "1", "--output", "unused", *args]
        config = train_cli.run_config_from_args(train_cli.build_parser().parse_args(argv))
        return config.learner.options.pretrain_augment

    assert saved("--method", "multiclass")
    assert not saved("--method", "multiclass", "--no-pretrain-augment")
    with pytest.raises(ValueError, match="--pretrain-augment .options of finetune, knn"):
        saved("--method", "protonet", "--no-pretrain-augment")


@pytest.mark.parametrize("augment", [False, True])
def test_pretraining_step_sees_augmented_images(augment: bool) -> None:
    from learners.feed.synthetic_episodes import SyntheticBatchSource
    from learners.methods.registry import build_learner, learner_config

    images, class_ids = SyntheticBatchSource(batch_size=8, seed=1).batch(0)
    losses = []
    for pretrain_augment in (False, augment):
        torch.manual_seed(0)
        config = learner_config(
            "multiclass",
            image_size=28,
            width=0.25,
            train_class_ids=list(range(32)),
            pretrain_augment=pretrain_augment,
        )
        learner = build_learner(config)
        losses.append(learner.fit_batch(images, class_ids))
    assert (losses[0] != losses[1]) == augment  # same seed: only the augmentation differs


# ------------------------------------------------- BatchNorm micro-batches (utils.micro_forward)


def test_micro_batches_are_a_random_partition_in_chunks_of_the_size() -> None:
    chunks = micro_batches(10, 4, torch.Generator().manual_seed(1))
    assert [len(c) for c in chunks] == [4, 4, 2]  # torch.split(x, 4) of the shuffled batch
    assert sorted(torch.cat(chunks).tolist()) == list(range(10))
    again = micro_batches(10, 4, torch.Generator().manual_seed(1))
    assert all(torch.equal(a, b) for a, b in zip(chunks, again))
    other = micro_batches(10, 4, torch.Generator().manual_seed(2))
    assert not torch.equal(torch.cat(chunks), torch.cat(other))


def test_each_micro_batch_is_normalised_by_its_own_statistics() -> None:
    """Re-typed formula: chunk c's rows are (x - mean_c) / sqrt(var_c + eps) (biased variance),
    and the running mean takes one momentum step per chunk, in chunk order; the mean loss over
    the rows is the authors' sum of (chunk size / batch size) x chunk mean."""
    torch.manual_seed(0)
    norm = nn.BatchNorm2d(3).train()
    images = torch.randn(7, 3, 2, 2) * 2 + 1
    chunks = micro_batches(7, 3, torch.Generator().manual_seed(0))
    rows, order = micro_batched_logits(norm, images, chunks)
    assert torch.equal(order, torch.cat(chunks))
    start, running = 0, torch.zeros(3)
    for chunk in chunks:
        x = images[chunk]
        mean = x.mean(dim=(0, 2, 3), keepdim=True)
        var = x.var(dim=(0, 2, 3), unbiased=False, keepdim=True)
        expected = (x - mean) / torch.sqrt(var + norm.eps)
        assert torch.allclose(rows[start : start + len(chunk)], expected, atol=1e-5)
        running = (1 - norm.momentum) * running + norm.momentum * mean.flatten()
        start += len(chunk)
    assert torch.allclose(norm.running_mean, running, atol=1e-6)
    whole = (nn.BatchNorm2d(3).train())(images[order])
    assert not torch.allclose(whole, rows, atol=1e-3)  # one batch normalises otherwise
    values = rows.flatten(1).sum(1)
    weighted = sum(
        len(c) / 7 * values[s : s + len(c)].pow(2).mean() for c, s in zip(chunks, (0, 3, 6))
    )
    assert torch.allclose(values.pow(2).mean(), weighted)


def test_finetuning_batch_norm_steps_once_per_micro_batch() -> None:
    """lr 0, no augmentation: a support of 5 images in micro-batches of 2 moves the first
    running mean by one momentum step per chunk (chunks of a fresh random order each epoch,
    from the episode's generator); the whole set (0) by one step per epoch."""
    network, ep = tiny_network(), one_episode()
    norm = first_norm(network)
    norm.running_mean.fill_(0.3)
    epochs, keep = 3, 1.0 - norm.momentum
    with torch.no_grad():
        inputs = network[0].blocks[0](ep.support_images)
    options = FinetuneOptions(epochs=epochs, lr=0.0, augment=False, bn_micro_batch=2)
    model, _ = finetune_network(network, ep, options, generator=torch.Generator().manual_seed(9))
    draws, expected = torch.Generator().manual_seed(9), norm.running_mean.clone()
    for _ in range(epochs):
        for chunk in micro_batches(5, 2, draws):
            expected = keep * expected + (1 - keep) * inputs[chunk].mean(dim=(0, 2, 3))
    assert torch.allclose(first_norm(model).running_mean, expected, atol=1e-5)
    whole, _ = finetune_network(
        network, ep, FinetuneOptions(epochs=epochs, lr=0.0, augment=False, bn_micro_batch=0)
    )
    assert not torch.allclose(first_norm(whole).running_mean, expected, atol=1e-4)


def test_sets_within_the_micro_batch_are_unchanged() -> None:
    """The paper's 5-way episodes (supports of 5 or 25 images, 75 queries) fit one micro-batch
    of 75: the logits are bit for bit those of one batch, the augmentation streams unmoved."""
    network, ep = tiny_network(), one_episode()
    assert DHILLON_BN_MICRO_BATCH == 75 and FinetuneOptions().bn_micro_batch == 75
    logits = [
        finetune_query_logits(
            network,
            ep,
            FinetuneOptions(epochs=2, lr=1e-3, transductive=True, bn_micro_batch=size),
            generator=torch.Generator().manual_seed(3),
        )
        for size in (75, 0)
    ]
    assert torch.equal(logits[0], logits[1])


def test_the_micro_batch_option_is_saved_and_old_runs_keep_one_batch() -> None:
    from learners.methods.multiclass import MulticlassConfig
    from learners.methods.registry import build_learner, learner_config, learner_config_from_dict

    config = learner_config(
        "transductive", image_size=28, width=0.25, train_class_ids=list(range(12))
    )
    assert config.options.finetune_bn_micro_batch == 75
    saved = config.to_dict()
    saved["options"]["finetune_bn_micro_batch"] = 20
    learner = build_learner(learner_config_from_dict(saved))
    assert learner.finetune_options(transductive=True).bn_micro_batch == 20
    assert MulticlassConfig.from_dict({}).finetune_bn_micro_batch == 0  # saved before it
    with pytest.raises(ValueError, match="--finetune-bn-micro-batch -1: expected an integer >= 0"):
        build_learner(learner_config("transductive", image_size=28, finetune_bn_micro_batch=-1))
