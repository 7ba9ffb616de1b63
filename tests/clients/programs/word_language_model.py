"""pytorch/examples' word_language_model, as a user runs it: `--accel` picks `torch.accelerator`'s device.

The same structure and command line as the example (data: a Dictionary and a Corpus of train/valid/test.txt
with `<eos>` per line; model: RNNModel over LSTM/GRU/RNN_TANH/RNN_RELU, or a Transformer encoder; main:
batchify, get_batch, repackage_hidden, clip_grad_norm_, the hand-written SGD step, lr annealing on
validation loss, torch.save/torch.load of the whole model, then the test loss). Written here, not copied.

Several runs in one interpreter (to pay the import once) are separated by a lone `+`:

    python word_language_model.py --data DIR --accel --model LSTM + --data DIR --accel --model GRU

Besides the example's log lines, prints one `RESULT {json}` line: per run, the device and the exact losses
(every training batch, each epoch's validation loss, the test loss) as Python floats.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time

import torch
import torch.nn.functional as F
from torch import nn


# ----------------------------------------------------------------------------------------------- data
class Dictionary:
    def __init__(self):
        self.word2idx: dict[str, int] = {}
        self.idx2word: list[str] = []

    def add_word(self, word: str) -> int:
        if word not in self.word2idx:
            self.word2idx[word] = len(self.idx2word)
            self.idx2word.append(word)
        return self.word2idx[word]

    def __len__(self) -> int:
        return len(self.idx2word)


class Corpus:
    def __init__(self, path: str):
        self.dictionary = Dictionary()
        self.train = self.tokenize(os.path.join(path, "train.txt"))
        self.valid = self.tokenize(os.path.join(path, "valid.txt"))
        self.test = self.tokenize(os.path.join(path, "test.txt"))

    def tokenize(self, path: str) -> torch.Tensor:
        """One int64 id per word, every line ended by `<eos>`."""
        if not os.path.isfile(path):
            raise FileNotFoundError(f"--data: no corpus file {path!r} (expected train.txt, valid.txt, test.txt)")
        ids = []
        with open(path, encoding="utf8") as f:
            for line in f:
                ids.extend(self.dictionary.add_word(word) for word in line.split() + ["<eos>"])
        return torch.tensor(ids, dtype=torch.int64)


# ---------------------------------------------------------------------------------------------- model
class RNNModel(nn.Module):
    """Embedding -> recurrent layers -> linear decoder, with dropout in between (log-probabilities out)."""

    def __init__(self, rnn_type, ntoken, ninp, nhid, nlayers, dropout=0.5, tie_weights=False):
        super().__init__()
        self.ntoken = ntoken
        self.drop = nn.Dropout(dropout)
        self.encoder = nn.Embedding(ntoken, ninp)
        if rnn_type in ("LSTM", "GRU"):
            self.rnn = getattr(nn, rnn_type)(ninp, nhid, nlayers, dropout=dropout)
        elif rnn_type in ("RNN_TANH", "RNN_RELU"):
            self.rnn = nn.RNN(ninp, nhid, nlayers, nonlinearity=rnn_type[4:].lower(), dropout=dropout)
        else:
            raise ValueError(f"--model: {rnn_type!r} is not one of LSTM, GRU, RNN_TANH, RNN_RELU, Transformer")
        self.decoder = nn.Linear(nhid, ntoken)
        if tie_weights:
            if nhid != ninp:
                raise ValueError("--tied needs --nhid equal to --emsize")
            self.decoder.weight = self.encoder.weight
        self.rnn_type, self.nhid, self.nlayers = rnn_type, nhid, nlayers
        self.init_weights()

    def init_weights(self):
        initrange = 0.1
        nn.init.uniform_(self.encoder.weight, -initrange, initrange)
        nn.init.zeros_(self.decoder.bias)
        nn.init.uniform_(self.decoder.weight, -initrange, initrange)

    def forward(self, input, hidden):
        emb = self.drop(self.encoder(input))
        output, hidden = self.rnn(emb, hidden)
        decoded = self.decoder(self.drop(output)).view(-1, self.ntoken)
        return F.log_softmax(decoded, dim=1), hidden

    def init_hidden(self, bsz):
        weight = next(self.parameters())  # zeros of the parameters' dtype, on their device
        if self.rnn_type == "LSTM":
            return (weight.new_zeros(self.nlayers, bsz, self.nhid), weight.new_zeros(self.nlayers, bsz, self.nhid))
        return weight.new_zeros(self.nlayers, bsz, self.nhid)


class PositionalEncoding(nn.Module):
    """Fixed sine/cosine position signal added to the embeddings, then dropout."""

    def __init__(self, d_model, dropout=0.1, max_len=5000):
        super().__init__()
        self.dropout = nn.Dropout(p=dropout)
        position = torch.arange(max_len, dtype=torch.float).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, d_model, 2).float() * (-math.log(10000.0) / d_model))
        pe = torch.zeros(max_len, 1, d_model)
        pe[:, 0, 0::2] = torch.sin(position * div_term)
        pe[:, 0, 1::2] = torch.cos(position * div_term)
        self.register_buffer("pe", pe)

    def forward(self, x):
        return self.dropout(x + self.pe[:x.size(0)])


class TransformerModel(nn.Transformer):
    """A causal Transformer encoder language model (nn.Transformer's encoder half only)."""

    def __init__(self, ntoken, ninp, nhead, nhid, nlayers, dropout=0.5):
        super().__init__(d_model=ninp, nhead=nhead, dim_feedforward=nhid, num_encoder_layers=nlayers,
                         dropout=dropout)
        self.model_type = "Transformer"
        self.src_mask = None
        self.pos_encoder = PositionalEncoding(ninp, dropout)
        self.input_emb = nn.Embedding(ntoken, ninp)
        self.ninp = ninp
        self.decoder = nn.Linear(ninp, ntoken)
        initrange = 0.1
        nn.init.uniform_(self.input_emb.weight, -initrange, initrange)
        nn.init.zeros_(self.decoder.bias)
        nn.init.uniform_(self.decoder.weight, -initrange, initrange)

    def forward(self, src, has_mask=True):
        if has_mask:
            if self.src_mask is None or self.src_mask.size(0) != len(src):
                self.src_mask = nn.Transformer.generate_square_subsequent_mask(len(src), device=src.device)
        else:
            self.src_mask = None
        src = self.pos_encoder(self.input_emb(src) * math.sqrt(self.ninp))
        output = self.decoder(self.encoder(src, mask=self.src_mask))
        return F.log_softmax(output, dim=-1)


# ----------------------------------------------------------------------------------------------- main
def parse_args(argv):
    p = argparse.ArgumentParser(description="PyTorch word-level RNN/LSTM/GRU/Transformer language model")
    p.add_argument("--data", type=str, default="./data/wikitext-2", help="folder with train/valid/test.txt")
    p.add_argument("--model", type=str, default="LSTM", help="RNN_TANH, RNN_RELU, LSTM, GRU, Transformer")
    p.add_argument("--emsize", type=int, default=200, help="size of word embeddings")
    p.add_argument("--nhid", type=int, default=200, help="hidden units per layer")
    p.add_argument("--nlayers", type=int, default=2, help="number of layers")
    p.add_argument("--lr", type=float, default=20, help="initial learning rate")
    p.add_argument("--clip", type=float, default=0.25, help="gradient clipping")
    p.add_argument("--epochs", type=int, default=40, help="upper epoch limit")
    p.add_argument("--batch_size", type=int, default=20, metavar="N", help="batch size")
    p.add_argument("--bptt", type=int, default=35, help="sequence length")
    p.add_argument("--dropout", type=float, default=0.2, help="dropout applied to layers (0 = none)")
    p.add_argument("--tied", action="store_true", help="tie the word embedding and softmax weights")
    p.add_argument("--seed", type=int, default=1111, help="random seed")
    p.add_argument("--log-interval", type=int, default=200, metavar="N", help="report interval")
    p.add_argument("--save", type=str, default="model.pt", help="path to save the final model")
    p.add_argument("--nhead", type=int, default=2, help="heads of the Transformer encoder")
    p.add_argument("--dry-run", action="store_true", help="verify the code and the model (one batch)")
    p.add_argument("--accel", action="store_true", help="use the current accelerator (torch.accelerator)")
    return p.parse_args(argv)


def main(argv) -> dict:
    args = parse_args(argv)
    torch.manual_seed(args.seed)
    if args.accel and torch.accelerator.is_available():
        device = torch.accelerator.current_accelerator()
    else:
        device = torch.device("cpu")
    print("Using device:", device)

    corpus = Corpus(args.data)

    def batchify(data, bsz):
        """Columns of `bsz` independent streams: (nbatch, bsz), the remainder trimmed."""
        nbatch = data.size(0) // bsz
        return data.narrow(0, 0, nbatch * bsz).view(bsz, -1).t().contiguous().to(device)

    eval_batch_size = 10
    train_data = batchify(corpus.train, args.batch_size)
    val_data = batchify(corpus.valid, eval_batch_size)
    test_data = batchify(corpus.test, eval_batch_size)

    ntokens = len(corpus.dictionary)
    if args.model == "Transformer":
        model = TransformerModel(ntokens, args.emsize, args.nhead, args.nhid, args.nlayers, args.dropout)
    else:
        model = RNNModel(args.model, ntokens, args.emsize, args.nhid, args.nlayers, args.dropout, args.tied)
    model = model.to(device)
    criterion = nn.NLLLoss()

    def repackage_hidden(h):
        """Detach the hidden state from the graph that made it (truncated backprop through time)."""
        if isinstance(h, torch.Tensor):
            return h.detach()
        return tuple(repackage_hidden(v) for v in h)

    def get_batch(source, i):
        seq_len = min(args.bptt, len(source) - 1 - i)
        return source[i:i + seq_len], source[i + 1:i + 1 + seq_len].view(-1)

    def evaluate(data_source):
        model.eval()
        total_loss = 0.
        if args.model != "Transformer":
            hidden = model.init_hidden(eval_batch_size)
        with torch.no_grad():
            for i in range(0, data_source.size(0) - 1, args.bptt):
                data, targets = get_batch(data_source, i)
                if args.model == "Transformer":
                    output = model(data).view(-1, ntokens)
                else:
                    output, hidden = model(data, hidden)
                    hidden = repackage_hidden(hidden)
                total_loss += len(data) * criterion(output, targets).item()
        return total_loss / (len(data_source) - 1)

    train_losses = []

    def train(epoch, lr):
        model.train()
        total_loss, start_time = 0., time.time()
        if args.model != "Transformer":
            hidden = model.init_hidden(args.batch_size)
        for batch, i in enumerate(range(0, train_data.size(0) - 1, args.bptt)):
            data, targets = get_batch(train_data, i)
            model.zero_grad()
            if args.model == "Transformer":
                output = model(data).view(-1, ntokens)
            else:
                hidden = repackage_hidden(hidden)
                output, hidden = model(data, hidden)
            loss = criterion(output, targets)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)  # exploding gradients in RNNs
            for p in model.parameters():
                p.data.add_(p.grad, alpha=-lr)
            train_losses.append(loss.item())
            total_loss += train_losses[-1]
            if batch % args.log_interval == 0 and batch > 0:
                cur_loss = total_loss / args.log_interval
                elapsed = time.time() - start_time
                print(f"| epoch {epoch:3d} | {batch:5d}/{len(train_data) // args.bptt:5d} batches | lr {lr:02.2f} "
                      f"| ms/batch {elapsed * 1000 / args.log_interval:5.2f} | loss {cur_loss:5.2f} "
                      f"| ppl {math.exp(cur_loss):8.2f}")
                total_loss, start_time = 0., time.time()
            if args.dry_run:
                break

    lr, best_val_loss, val_losses = args.lr, None, []
    for epoch in range(1, args.epochs + 1):
        epoch_start_time = time.time()
        train(epoch, lr)
        val_loss = evaluate(val_data)
        val_losses.append(val_loss)
        print("-" * 89)
        print(f"| end of epoch {epoch:3d} | time: {time.time() - epoch_start_time:5.2f}s | valid loss {val_loss:5.2f} "
              f"| valid ppl {math.exp(val_loss):8.2f}")
        print("-" * 89)
        if best_val_loss is None or val_loss < best_val_loss:
            with open(args.save, "wb") as f:
                torch.save(model, f)
            best_val_loss = val_loss
        else:
            lr /= 4.0  # anneal when validation stops improving

    with open(args.save, "rb") as f:
        model = torch.load(f, weights_only=False)  # the whole module, as the example saves it
        if args.model in ("RNN_TANH", "RNN_RELU", "LSTM", "GRU"):
            model.rnn.flatten_parameters()  # the weights are no longer one contiguous chunk after loading
    test_loss = evaluate(test_data)
    print("=" * 89)
    print(f"| End of training | test loss {test_loss:5.2f} | test ppl {math.exp(test_loss):8.2f}")
    print("=" * 89)
    return {"model": args.model, "device": str(device), "loaded_device": str(next(model.parameters()).device),
            "train": train_losses, "valid": val_losses, "test": test_loss}


def _runs(argv: list[str]) -> list[list[str]]:
    runs, current = [], []
    for arg in argv:
        if arg == "+":
            runs.append(current)
            current = []
        else:
            current.append(arg)
    return runs + [current]


if __name__ == "__main__":
    results = [main(argv) for argv in _runs(sys.argv[1:])]
    print("RESULT " + json.dumps(results))
