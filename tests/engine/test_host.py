"""One device-to-host transfer for several tensors gives exactly what ``tolist`` gives for each."""
import torch

from trajkit.engine.host import packed_to_host, to_device, to_host


def test_packed_transfer_is_exact_per_dtype():
    gen = torch.Generator().manual_seed(0)
    tensors = [torch.randint(0, 2 ** 40, (3,), generator=gen),  # long [B]
               torch.randint(0, 50_000, (3, 5), generator=gen),  # long [B, w+1]
               torch.log(torch.rand(3, 5, generator=gen)),  # float32 logprobs
               torch.rand(3, 4, generator=gen, dtype=torch.float64),  # float64
               torch.rand(3, 0), torch.tensor([True, False, True])]  # empty, bool
    expected = [t.tolist() for t in tensors]
    assert packed_to_host(*tensors) == expected
    assert to_host(*tensors) == expected
    assert to_device([3, 1, 4], "cpu").tolist() == [3, 1, 4] and to_device([2], "cpu").dtype == torch.long
