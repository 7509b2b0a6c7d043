-- text_to_tokens.lua: turns a text file into a token file in llm.c's .bin layout (a 256 x int32
-- header, then uint16 tokens), byte-level (token = byte, id = byte + 1 in moonshard), for
-- scripts/gpt_fsdp.lua --tokens. The last --val-fraction of the text goes to OUT's
-- held-out twin (OUT with "_val" before ".bin"), as llm.c's train/val files.
--   build/moonshard scripts/text_to_tokens.lua --data book.txt --out book.bin
local argparse = require "moonshard.argparse"
local td = require "moonshard.token_dataset"

local parser = argparse.ArgumentParser{ description = "Turn a text file into byte-level token files (llm.c .bin)" }
parser:add_argument("--data", { required = true, metavar = "FILE", help = "the text file" })
parser:add_argument("--out", { required = true, metavar = "FILE", help = "the training token file (.bin)" })
parser:add_argument("--val-fraction", { type = "float", default = 0.1, metavar = "F",
  help = "the share of the text (its end) written to the held-out file" })

local args = parser:parse_args(arg)
if not args.out:match("%.bin$") then parser:error(("--out %s: the name must end in .bin"):format(args.out)) end
if not (args.val_fraction >= 0 and args.val_fraction < 1) then
  parser:error(("--val-fraction must be in [0, 1), got %s"):format(args.val_fraction))
end
local f = io.open(args.data, "rb")
if not f then parser:error(("--data %s: cannot open the file"):format(args.data)) end
local text = f:read("a")
f:close()
if #text == 0 then parser:error(("--data %s: the file is empty"):format(args.data)) end
local ids = td.ByteTokenizer():encode(text)
local n_val = math.floor(#text * args.val_fraction)
local val_path = args.out:gsub("%.bin$", "_val.bin")
td.write_tokens(args.out, ids:narrow(1, 1, #text - n_val))
if n_val > 0 then td.write_tokens(val_path, ids:narrow(1, #text - n_val + 1, n_val)) end
print(("%s: %d tokens; %s: %d tokens"):format(args.out, #text - n_val, val_path, n_val))
